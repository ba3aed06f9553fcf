#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| goodput::fuzz::import(data));
