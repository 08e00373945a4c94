//! A decision told in the words of the MCO's boot image controller (behaviour §8).

use super::{Decision, Reason};

impl Decision {
    /// The decision in the words of the MCO's boot image controller, for people who grep
    /// the logs for them (behaviour §8): `Reconciling machineset <name> on GCP, with arch
    /// x86_64`, `New target boot image: …`, `Current image: …`, then `Patching machineset
    /// <name>` or `No patching required for machineset <name>` (with our reason and why).
    pub fn story(&self, name: &str) -> String {
        let mut s = String::with_capacity(160 + self.message.len());
        if let (Some(platform), Some(arch)) = (self.platform, self.arch) {
            s.push_str("Reconciling machineset ");
            s.push_str(name);
            s.push_str(" on ");
            s.push_str(platform);
            s.push_str(", with arch ");
            s.push_str(arch.rpm());
            s.push_str("; ");
        }
        if let Some(target) = self.target.as_deref() {
            s.push_str("New target boot image: ");
            s.push_str(target);
            s.push_str("; ");
        }
        if let Some(current) = self.current.as_deref() {
            s.push_str("Current image: ");
            s.push_str(if current.is_empty() {
                "<empty>"
            } else {
                current
            });
            s.push_str("; ");
        }
        match self.reason {
            Reason::Updated => {
                s.push_str("Patching machineset ");
                s.push_str(name);
            }
            Reason::UpToDate => {
                s.push_str("No patching required for machineset ");
                s.push_str(name);
            }
            reason => {
                s.push_str("No patching required for machineset ");
                s.push_str(name);
                s.push_str(": ");
                s.push_str(reason.as_str());
                s.push_str(": ");
                s.push_str(&self.message);
            }
        }
        s
    }
}
