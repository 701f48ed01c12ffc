//! This server as a replica (design.md, "Beyond one machine"): the replication consumers of
//! `syncrepl` (crate `repl`) run as tasks of their own, started with the listeners, each
//! retrying on its schedule, so the server serves whether or not its providers are up. A
//! replica is read-only: writes by anyone but the administrator are answered with a referral
//! to `updateref` (or unwillingToPerform without it), as slapd answers them on a shadow
//! database. The consumers themselves write through the writer directly, as the server.

use std::sync::Arc;

use proto::ResultCode;

use crate::state::Shared;
use crate::StartError;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;

/// Refuses a write on a replica unless the administrator makes it (slapd lets its rootdn
/// write to a shadow database too).
pub(crate) fn refer_writes(shared: &Shared, who: &Identity) -> LdapResult<()> {
    let c = &shared.config();
    if c.syncrepl.is_empty() || c.multi_provider || who.is_admin {
        return Ok(());
    }
    if c.updateref.is_empty() {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "shadow context; no update referral",
        ));
    }
    Err(LdapError::referral(c.updateref.clone()))
}

/// Checks each consumer's configuration against the directory: its search base within a
/// suffix, its filter, attributes and TLS settings; and multi-provider's needs (a provider
/// with its own server id).
pub(crate) fn check(dit: &dit::Dit, config: &crate::Config) -> Result<(), StartError> {
    check_settings(config).map_err(StartError::Config)?;
    for s in &specs(config) {
        repl::consumer::apply::Area::new(dit, s)
            .map_err(|e| StartError::Config(format!("syncrepl rid={:03}: {e}", s.rid)))?;
    }
    Ok(())
}

/// What the replication settings say alone (before the directory is open): multi-provider's
/// needs, each consumer's settings, rids used once.
pub(crate) fn check_settings(config: &crate::Config) -> Result<(), String> {
    if config.multi_provider {
        if !config.syncprov {
            return Err(
                "multi_provider needs syncprov = true (each provider serves the others)".into(),
            );
        }
        if config.server_id == 0 {
            return Err(
                "multi_provider needs a server_id (1-4095) of its own on each provider".into(),
            );
        }
    }
    let mut rids = Vec::new();
    for s in &specs(config) {
        let at = format!("syncrepl rid={:03}", s.rid);
        s.check().map_err(|e| format!("{at}: {e}"))?;
        if rids.contains(&s.rid) {
            return Err(format!("{at}: rid used twice"));
        }
        rids.push(s.rid);
    }
    Ok(())
}

/// The consumers as configured, told whether this server is one of several providers.
fn specs(config: &crate::Config) -> Vec<repl::consumer::ConsumerSpec> {
    let mut specs = config.syncrepl.clone();
    for s in &mut specs {
        s.multi_provider = config.multi_provider;
    }
    specs
}

/// Starts one task per consumer; the caller aborts them at shutdown.
pub(crate) fn start(shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    specs(&shared.config())
        .into_iter()
        .zip(&shared.replication)
        .zip(&shared.consumer_credentials)
        .map(|((spec, status), credentials)| {
            tokio::spawn(repl::consumer::run(
                shared.clone(),
                spec,
                status.clone(),
                credentials.clone(),
            ))
        })
        .collect()
}
