//! The `update_plan` tool: the model's plan for a task of several steps, which front ends show
//! apart from the answer (ACP's `plan` update, a checklist in the terminal). It changes
//! nothing, so it needs no permission; its arguments are the plan, and the loop sends them on
//! as [`crate::AgentEvent::Plan`] once the call is accepted. Each call gives the whole plan,
//! which replaces the last (as ACP's `plan` update does).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolKind, ToolOutcome};
use crate::conversation::ToolSpec;

/// The tool's name, which the loop recognises.
pub const NAME: &str = "update_plan";

/// The most steps a plan may have: a longer one is not a plan a person reads.
pub const MAX_STEPS: usize = 50;

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub step: String,
    pub status: StepStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanArgs {
    plan: Vec<PlanStep>,
}

/// The plan a call's arguments give, or what is wrong with them, for the model to fix.
pub fn parse(arguments: &Value) -> Result<Vec<PlanStep>, String> {
    let args: PlanArgs = serde_json::from_value(arguments.clone()).map_err(|e| {
        format!(
            "invalid arguments: {e}; pass {{\"plan\": [{{\"step\": \"…\", \"status\": \"pending\" | \"in_progress\" | \"completed\"}}]}}"
        )
    })?;
    if args.plan.is_empty() {
        return Err("the plan has no steps; give every step of the task".into());
    }
    if args.plan.len() > MAX_STEPS {
        return Err(format!(
            "the plan has {} steps; keep it to {MAX_STEPS} or fewer",
            args.plan.len()
        ));
    }
    if let Some(i) = args.plan.iter().position(|s| s.step.trim().is_empty()) {
        return Err(format!("step {} is empty; say what the step does", i + 1));
    }
    let working = args
        .plan
        .iter()
        .filter(|s| s.status == StepStatus::InProgress)
        .count();
    if working > 1 {
        return Err(format!(
            "{working} steps are in_progress; mark only the one being worked on"
        ));
    }
    Ok(args.plan)
}

/// `update_plan {plan: [{step, status}]}`.
pub struct UpdatePlan;

#[async_trait]
impl Tool for UpdatePlan {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Show the user your plan for a task of several steps, and keep it current: call it when you have a plan, and again as steps are done or the plan changes, each time with the whole plan. At most one step is in_progress. Skip it for a task of one or two steps.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "plan": {
                        "type": "array",
                        "description": "Every step of the plan, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string", "description": "What the step does, in a few words."},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            },
                            "required": ["step", "status"],
                            "additionalProperties": false,
                        },
                    },
                },
                "required": ["plan"],
                "additionalProperties": false,
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    async fn call(&self, arguments: Value, _cx: &ToolContext) -> ToolOutcome {
        let plan = parse(&arguments)?;
        let done = plan
            .iter()
            .filter(|s| s.status == StepStatus::Completed)
            .count();
        Ok(format!(
            "plan shown to the user: {} steps, {done} completed",
            plan.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_checked_so_the_model_can_fix_it() {
        let ok = json!({"plan": [
            {"step": "read the code", "status": "completed"},
            {"step": "fix the bug", "status": "in_progress"},
            {"step": "run the tests", "status": "pending"},
        ]});
        assert_eq!(parse(&ok).unwrap().len(), 3);
        let two_working = json!({"plan": [
            {"step": "a", "status": "in_progress"},
            {"step": "b", "status": "in_progress"},
        ]});
        assert!(parse(&two_working).unwrap_err().contains("only the one"));
        assert!(
            parse(&json!({"plan": []}))
                .unwrap_err()
                .contains("no steps")
        );
        let bad_status = json!({"plan": [{"step": "a", "status": "done"}]});
        assert!(parse(&bad_status).unwrap_err().contains("in_progress"));
        let blank = json!({"plan": [{"step": "  ", "status": "pending"}]});
        assert!(parse(&blank).unwrap_err().contains("step 1 is empty"));
        let long: Vec<Value> = (0..51)
            .map(|i| json!({"step": format!("s{i}"), "status": "pending"}))
            .collect();
        assert!(parse(&json!({ "plan": long })).unwrap_err().contains("50"));
    }
}
