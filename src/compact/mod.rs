//! Offline compaction without a model: token estimates, the cut point, the deterministic
//! summary, and the entries the runtime reads back (the appended `compaction` entry and the
//! successor transcript). Everything here is pure: it works on already-parsed entries and
//! messages (`serde_json::Value`, in the shapes the runtime's session layer uses) and leaves
//! reading, locking and writing files to the command layer.

pub mod estimate;

#[cfg(test)]
mod testgen;

pub use estimate::{ContextEstimate, Estimator, TokenCounter};
