//! Bulk import and export, with the server stopped: `dit::bulk` does the work; an import here
//! first builds, from the configuration, the empty directory in memory that it checks every
//! entry against (schema, naming contexts, memberOf), as a starting server would.

use std::io::Read;

pub use dit::bulk::{export, BulkError, ImportOptions, ImportReport, Rejected};

use crate::{Config, Mode, Server};

/// Imports LDIF into the empty data directory of `config`, holding its lock (as a server does:
/// an import into the directory of a running server, or a second import, stops at once with
/// the PID that has it; so does one whose file system has less than `min_free_bytes` free). `progress(entries, bytes_read)` is called every twenty thousand
/// entries or so.
pub fn import(
    config: Config,
    input: impl Read + Send,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ImportReport, BulkError> {
    let dir = config.data_dir.clone();
    let admin = config.admin_dn.clone();
    let server = Server::build(config, Mode::Memory).map_err(|e| match e {
        crate::StartError::Config(m) => BulkError::Config(m),
        other => BulkError::Setup(other.to_string()),
    })?;
    // Before anything in the directory is looked at, as a starting server takes it: the lock,
    // then a file system with at least min_free_bytes free.
    let _lock = crate::lock_data_dir(&server.shared.config())
        .map_err(|e| BulkError::Setup(e.to_string()))?;
    let stale = store::persist::remove_stale_tmp(&store::persist::FsIo, &dir)
        .map_err(|e| BulkError::Storage(e.to_string()))?;
    for t in stale {
        tracing::warn!(
            "removed {}: a file an earlier import or server stopped writing and never renamed into place",
            dir.join(&t.name).display()
        );
    }
    let shared = &server.shared;
    dit::bulk::import(
        shared,
        &shared.config().memberof_spec(),
        &admin,
        &dir,
        input,
        opts,
        progress,
    )
}
