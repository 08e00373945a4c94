//! The loop every importer runs: a pass at each wake-up, what it learned published, its
//! trouble logged once and retried with backoff.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::cluster::learned::LearnedCell;
use crate::core::snapshot::SharedSnapshot;
use crate::health::until;

use super::{Kit, Lister, Plugin, Retention, Warnings};

/// The first wait after trouble, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// What every importer's loop shares.
pub struct Frame {
    /// Where the MachineSets are.
    pub namespace: String,
    pub snapshot: SharedSnapshot,
    pub learned: Arc<LearnedCell>,
    /// Rung by the webhook when a MachineSet waits for an import.
    pub wanted: Arc<Notify>,
    pub resync: Duration,
    /// Whether this replica holds the Lease (imports and deletes only then); `None` when
    /// nothing is elected (`--no-touch`).
    pub leader: Option<watch::Receiver<bool>>,
    /// The pod, for the Events' reporting instance.
    pub identity: String,
    /// How long an image of ours nothing names is kept.
    pub retention: Duration,
}

impl Frame {
    pub async fn run<P: Plugin>(
        self,
        mut plugin: P,
        client: kube::Client,
        mut changes: watch::Receiver<String>,
        mut stop: watch::Receiver<bool>,
    ) {
        let reporter = Reporter {
            controller: "bootimage-webhook".into(),
            instance: Some(self.identity.clone()),
        };
        let mut kit = Kit {
            lister: Lister {
                client: client.clone(),
                namespace: self.namespace.clone(),
                snapshot: self.snapshot.clone(),
                machines: P::MACHINES,
                named: P::named,
            },
            warnings: Warnings::new(client, reporter),
            retention: Retention::new(self.retention),
        };
        let mut trouble = Trouble::default();
        let mut published: Option<P::Learned> = None;
        let mut leader = self.leader.clone();
        loop {
            let snap = self.snapshot.load_full();
            let leading = leader.as_ref().is_some_and(|l| *l.borrow());
            if !leading {
                kit.retention.clear();
            }
            let mut wait = self.resync;
            let now = Instant::now();
            match (plugin.work(&snap), trouble.next_try) {
                // In trouble: wake-ups wait for the backoff.
                (Some(_), Some(t)) if now < t => wait = t.saturating_duration_since(now),
                (Some(work), _) => {
                    let listed = match leading {
                        true => kit.lister.list().await,
                        false => None,
                    };
                    let pass = plugin.pass(&mut kit, &snap, &work, listed.as_ref()).await;
                    if published.as_ref() != Some(&pass.learned) {
                        P::publish(&self.learned, pass.learned.clone());
                        published = Some(pass.learned);
                    }
                    let words = (P::TROUBLE, P::AGAIN);
                    if let Some(retry) = trouble.report(pass.trouble, Instant::now(), words) {
                        wait = retry;
                    }
                }
                (None, _) => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                r = changes.changed() => if r.is_err() { return },
                _ = self.wanted.notified() => {}
                _ = leader_changed(&mut leader) => {}
                _ = until(&mut stop, true) => return,
            }
        }
    }
}

/// Resolves when leadership changes; never when nothing is elected.
async fn leader_changed(leader: &mut Option<watch::Receiver<bool>>) {
    if let Some(l) = leader
        && l.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// Trouble as the loop keeps it: the kind last logged, the next wait, and no pass before
/// `next_try`.
#[derive(Debug)]
struct Trouble {
    reported: Option<String>,
    backoff: Duration,
    next_try: Option<Instant>,
}

impl Default for Trouble {
    fn default() -> Trouble {
        Trouble {
            reported: None,
            backoff: FIRST_BACKOFF,
            next_try: None,
        }
    }
}

impl Trouble {
    /// Logs a new trouble once (`words`: when it starts, when it is over); the wait before
    /// a retry when there was trouble.
    fn report(
        &mut self,
        trouble: Option<String>,
        now: Instant,
        (starts, over): (&str, &str),
    ) -> Option<Duration> {
        let Some(why) = trouble else {
            if self.reported.take().is_some() {
                tracing::info!("{over}");
            }
            self.backoff = FIRST_BACKOFF;
            self.next_try = None;
            return None;
        };
        let retry = self.backoff;
        if self.reported.as_deref() != Some(&why) {
            tracing::warn!(error = %why, retry_in = ?retry, "{starts}");
            self.reported = Some(why);
        }
        self.backoff = (retry * 2).min(MAX_BACKOFF);
        self.next_try = Some(now + retry);
        Some(retry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trouble_backs_off_doubling_to_ten_minutes_and_clears_when_over() {
        let mut t = Trouble::default();
        let now = Instant::now();
        let words = ("starts", "over");
        let mut waits = Vec::new();
        for _ in 0..10 {
            waits.push(t.report(Some("down".into()), now, words).unwrap().as_secs());
        }
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 600, 600, 600]);
        assert_eq!(t.next_try, Some(now + MAX_BACKOFF));
        assert_eq!(t.reported.as_deref(), Some("down"));
        // Another kind of trouble keeps the backoff going.
        assert_eq!(
            t.report(Some("other".into()), now, words),
            Some(MAX_BACKOFF)
        );
        assert_eq!(t.reported.as_deref(), Some("other"));
        assert_eq!(t.report(None, now, words), None);
        assert_eq!((t.next_try, t.reported.as_deref()), (None, None));
        assert_eq!(
            t.report(Some("down".into()), now, words),
            Some(FIRST_BACKOFF)
        );
    }
}
