//! JS-compatible JSON: whatever parses must serialise to text that parses back to the same
//! value, and serialising that again must give the same bytes (a fixed point, as for
//! `JSON.stringify(JSON.parse(s))`).
#![no_main]

use clawkeeper::jsjson;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = jsjson::parse(data) else { return };
    for text in [jsjson::to_string_pretty(&v), jsjson::to_string_compact(&v)] {
        let again = jsjson::parse(text.as_bytes()).expect("our own output parses");
        assert_eq!(jsjson::to_string_compact(&again), jsjson::to_string_compact(&v));
    }
});
