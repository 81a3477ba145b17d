//! The one integration-test binary: runs `clawkeeper` (and, where available, the reference
//! OpenClaw) against stores built in temp dirs. `util` holds the shared helpers, every other
//! module one topic.

mod cleanup;
mod demo;
mod parity;
mod storegen;
mod util;
