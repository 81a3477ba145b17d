//! The one integration-test binary: every topic is a module here.

mod generator;
mod model;
mod properties;
mod transcript;
mod transcript_safety;
mod treegen;
mod util;
