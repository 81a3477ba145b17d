//! The one integration-test binary: every topic is a module here.

mod crash;
mod generator;
mod model;
mod properties;
mod safety;
mod transcript;
mod transcript_safety;
mod treegen;
mod util;
