//! Work that must not take the cores from the clients: slow password hashes — binds'
//! verifications and changes' hashes alike (`credcache::Credentials`) — run on threads of their
//! own at a lower CPU priority (Linux nice steps), so that when both compete for a core the
//! scheduler runs the connections first.
//!
//! Threads of their own because an unprivileged process cannot raise a thread's priority back
//! once lowered, and tokio's blocking pool reuses its threads for other work (large searches,
//! snapshots).
//! Elsewhere than on Linux, where nice is per process, the priority stays as it is.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

/// Lowers the calling thread's CPU priority by `steps` nice steps (at most to 19); a refusal
/// leaves it as it was.
fn lower_priority(steps: i32) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let me = Some(rustix::thread::gettid());
        let now = getpriority_process(me).unwrap_or(0);
        if let Err(e) = setpriority_process(me, (now + steps).min(19)) {
            tracing::debug!("a background thread keeps the server's CPU priority: {e}");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = steps;
}

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads, started on first use, `steps` nice steps below the server, taking
/// jobs in order from one queue: at most `threads` of them run at once, however many
/// connections ask.
pub(crate) struct Pool {
    name: &'static str,
    steps: i32,
    threads: usize,
    queue: OnceLock<Result<mpsc::Sender<Job>, String>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("steps", &self.steps)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub(crate) fn new(name: &'static str, steps: i32, threads: usize) -> Pool {
        Pool {
            name,
            steps,
            threads: threads.max(1),
            queue: OnceLock::new(),
        }
    }

    fn start(&self) -> Result<mpsc::Sender<Job>, String> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..self.threads {
            let rx = rx.clone();
            let steps = self.steps;
            std::thread::Builder::new()
                .name(format!("{}-{i}", self.name))
                .spawn(move || {
                    lower_priority(steps);
                    loop {
                        // The lock is held only while waiting for the next job.
                        let next = match rx.lock() {
                            Ok(q) => q.recv(),
                            Err(_) => return,
                        };
                        match next {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                })
                .map_err(|e| format!("cannot start the {} threads: {e}", self.name))?;
        }
        Ok(tx)
    }

    /// Runs `job` on one of the pool's threads and returns its result.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, String> {
        let queue = self.queue.get_or_init(|| self.start()).as_ref()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        queue
            .send(Box::new(move || {
                // A job that panics loses its result (the caller gets an error), not the
                // pool's thread, as a task on tokio's blocking pool would.
                if let Ok(r) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
                    let _ = tx.send(r);
                }
            }))
            .map_err(|_| format!("the {} threads have stopped", self.name))?;
        rx.await
            .map_err(|_| format!("a {} job ended without a result", self.name))
    }
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;
    use rustix::process::getpriority_process;

    fn own_priority() -> i32 {
        getpriority_process(Some(rustix::thread::gettid())).unwrap()
    }

    #[tokio::test]
    async fn pools_run_below_the_server() {
        let ours = own_priority();
        let pool = Pool::new("p", 5, 2);
        for _ in 0..3 {
            assert_eq!(pool.run(own_priority).await.unwrap(), (ours + 5).min(19));
        }
        // The calling thread keeps its priority.
        assert_eq!(own_priority(), ours);
    }

    #[tokio::test]
    async fn a_pool_runs_every_job_of_many_callers() {
        let pool = Arc::new(Pool::new("p", 1, 2));
        let mut tasks = Vec::new();
        for i in 0..50u64 {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move { pool.run(move || i * 2).await }));
        }
        let mut sum = 0;
        for t in tasks {
            sum += t.await.unwrap().unwrap();
        }
        assert_eq!(sum, (0..50u64).map(|i| i * 2).sum::<u64>());
    }

    #[tokio::test]
    async fn a_job_that_panics_leaves_the_pool_working() {
        let pool = Pool::new("p", 1, 1);
        assert!(pool.run(|| panic!("a failing job")).await.is_err());
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
    }
}
