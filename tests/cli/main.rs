//! The one integration-test binary: runs `clawkeeper` (and, where available, the reference
//! OpenClaw) against stores built in temp dirs.

mod cleanup;
mod util;
