//! `berth token …`: the tokens `berth serve` accepts (berth-serve's `TokenStore`).

use berth_ops::{DeviceId, Ops};
use berth_serve::{Role, TokenStore};

use crate::cli::TokenCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: TokenCmd) -> anyhow::Result<()> {
    let store = TokenStore::new(ops.home());
    match cmd {
        TokenCmd::Create {
            device,
            admin,
            workspace,
            expires,
            json,
        } => {
            let (name, role) = match (device, admin) {
                (Some(device), _) => {
                    let id = DeviceId::new(device.clone())?;
                    (device, Role::Device { device: id })
                }
                (None, Some(name)) => (name, Role::Admin),
                (None, None) => unreachable!("clap requires --device or --admin"),
            };
            // Bound first: a token for a workspace that does not exist is never made.
            if let (Role::Device { device }, Some(ws)) = (&role, &workspace) {
                ops.bind(device.as_str(), ws).await?;
            }
            let expires_in = expires.map(|days| chrono::Duration::days(i64::from(days)));
            let (record, secret) = store.create(&name, role, expires_in)?;
            if json {
                render::json(&serde_json::json!({ "token": secret, "record": record }))?;
            } else {
                render::line(&secret)?;
                eprintln!(
                    "token {name} made; it is shown this once. Clients send it as `Authorization: Bearer <token>`."
                );
            }
        }
        TokenCmd::List(flag) => {
            let tokens = store.list()?;
            if flag.json {
                return Ok(render::json(&tokens)?);
            }
            let rows: Vec<Vec<String>> = tokens
                .iter()
                .map(|t| {
                    let (kind, device) = match &t.role {
                        Role::Admin => ("admin", "-".to_owned()),
                        Role::Device { device } => ("device", render::cell(device.as_str())),
                    };
                    vec![
                        t.name.clone(),
                        kind.to_owned(),
                        device,
                        render::time(t.created_at),
                        t.expires_at
                            .map_or_else(|| "never".to_owned(), render::time),
                    ]
                })
                .collect();
            render::table(&["NAME", "KIND", "DEVICE", "MADE", "EXPIRES"], &rows)?;
        }
        TokenCmd::Revoke { name } => {
            store.revoke(&name)?;
            eprintln!("token {name} revoked: refused from now on, its connections closed");
        }
    }
    Ok(())
}
