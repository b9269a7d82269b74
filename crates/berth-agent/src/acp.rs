//! ACP's facts about berth's turns and errors, in the crate both ACP ends depend on (berth-run's
//! ACP client, berth-acp's server), so neither needs the other for them: the one mapping
//! between ACP's `StopReason` and a turn's `TurnStop`, both ways, so an agent's end means the
//! same through either; and the one way an error of a kind becomes an ACP error, its code
//! from berth-core's table ([`ErrorKind::json_rpc_code`]).

use agent_client_protocol::v1::schema::StopReason;
use agent_client_protocol::{Error, ErrorCode};
use berth_core::ErrorKind;

use crate::TurnStop;

/// An ACP error of `kind`: its code by berth-core's one table ([`ErrorKind::json_rpc_code`],
/// which MCP answers with too), berth's message, and the kind in its data
/// (`{"kind": "not_found"}`), as every protocol of berth's spells it.
pub fn error_of_kind(kind: ErrorKind, message: impl Into<String>) -> Error {
    let code = ErrorCode::from(kind.json_rpc_code());
    Error::new(code, message.into()).data(serde_json::json!({ "kind": kind.as_str() }))
}

/// How an ACP agent's turn ended, as berth's own agent's ends: a reason berth does not know
/// is a turn that did not finish its answer, as a cancelled one.
pub fn turn_stop_of(reason: StopReason) -> TurnStop {
    match reason {
        StopReason::EndTurn => TurnStop::EndTurn,
        StopReason::MaxTokens => TurnStop::MaxTokens,
        StopReason::MaxTurnRequests => TurnStop::MaxToolIterations,
        StopReason::Refusal => TurnStop::Refusal,
        _ => TurnStop::Cancelled,
    }
}

/// The reason a prompt's answer gives for a turn that ended `stop`; for a failure, its
/// message, which ACP answers as an error instead.
pub fn stop_reason_of(stop: TurnStop) -> Result<StopReason, String> {
    Ok(match stop {
        TurnStop::EndTurn => StopReason::EndTurn,
        TurnStop::MaxTokens => StopReason::MaxTokens,
        TurnStop::MaxToolIterations => StopReason::MaxTurnRequests,
        TurnStop::Refusal => StopReason::Refusal,
        TurnStop::Cancelled => StopReason::Cancelled,
        TurnStop::Failed { message } => return Err(message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_that_answers_comes_back_as_itself() {
        for stop in [
            TurnStop::EndTurn,
            TurnStop::MaxTokens,
            TurnStop::MaxToolIterations,
            TurnStop::Refusal,
            TurnStop::Cancelled,
        ] {
            let reason = stop_reason_of(stop.clone()).unwrap();
            assert_eq!(turn_stop_of(reason), stop);
        }
        assert_eq!(
            stop_reason_of(TurnStop::Failed {
                message: "the provider said 529".into()
            }),
            Err("the provider said 529".to_owned())
        );
    }

    #[test]
    fn an_error_carries_its_kinds_code_and_name() {
        for kind in ErrorKind::ALL {
            let e = error_of_kind(kind, "why");
            assert_eq!(i32::from(e.code), kind.json_rpc_code(), "{kind:?}");
            assert_eq!(e.message, "why");
            assert_eq!(e.data, Some(serde_json::json!({ "kind": kind.as_str() })));
        }
    }
}
