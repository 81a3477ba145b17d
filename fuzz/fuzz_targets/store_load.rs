//! The `sessions.json` loader on arbitrary bytes: it never panics; what it refuses is a clean
//! refusal (exit 3) naming the file; what it accepts serialises (as `JSON.stringify(store,
//! null, 2)`) to text that loads again to the same store without further normalisation, so
//! a load → save → load cycle is stable.
#![no_main]

use std::path::Path;

use clawkeeper::exit::{Exit, exit_for_error};
use clawkeeper::store;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/fuzz/sessions.json");
    match store::parse(path, data.to_vec()) {
        Err(e) => {
            assert_eq!(exit_for_error(&e), Exit::Refused, "{e:#}");
            assert!(format!("{e:#}").contains("/fuzz/sessions.json"), "{e:#}");
        }
        Ok((s, unchanged)) => {
            let text = store::serialize(&s);
            if let Some(raw) = &unchanged {
                assert_eq!(raw.as_bytes(), data);
            }
            let (again, unchanged_again) = store::parse(path, text.clone().into_bytes())
                .expect("a saved store loads again");
            assert_eq!(store::serialize(&again), text, "load → save → load is not stable");
            assert!(unchanged_again.is_some(), "a saved store needed normalising again");
        }
    }
});
