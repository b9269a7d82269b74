//! The one mapping between ACP's `StopReason` and a turn's `TurnStop`, both ways: berth-run's
//! ACP client reads an agent's answer with it, and berth-acp's server answers an editor's
//! prompt with it, so an agent's end means the same through either.

use agent_client_protocol::v1::schema::StopReason;
use berth_agent::TurnStop;

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
}
