//! The one integration-test binary: every topic is a module here. Tests run `clawkeeper`
//! (and, where available, the reference OpenClaw) against stores built in temp dirs.

mod cleanup;
mod cleanup_safety;
mod crash;
mod generator;
mod model;
mod properties;
mod safety;
mod transcript;
mod transcript_safety;
mod treegen;
mod util;
