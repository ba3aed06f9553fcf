//! Durations written as numbers (in the key's unit) or strings with a unit ("500ms", "2s", "1m").
//!
//! Hand-written: the grammar is one number and one of six units, and it must accept both TOML
//! numbers and strings in one field, which the duration crates do not do. Canonical form is a
//! plain number in the field's unit, so `"500ms"` and `500` in a `_ms` field hash alike.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Parses `"<number><unit>"` into seconds. Units: ns, us, ms, s, m, h.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("`{s}` has no unit (use ms, s, m or h)"))?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` does not start with a number"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => return Err(format!("unknown unit `{u}` in `{s}` (use ms, s, m or h)")),
    };
    Ok(v * scale)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrStr {
    Int(i64),
    Float(f64),
    Str(String),
}

macro_rules! duration_type {
    ($name:ident, $unit:literal, $per_second:expr) => {
        #[doc = concat!("A duration; a bare number is in ", $unit, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
        pub struct $name(pub f64);

        impl $name {
            pub fn seconds(self) -> f64 {
                self.0 / $per_second
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_f64(self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                match NumOrStr::deserialize(d).map_err(|_| {
                    serde::de::Error::custom(concat!(
                        "expected a number (in ",
                        $unit,
                        ") or a string with a unit such as \"500ms\" or \"2s\""
                    ))
                })? {
                    NumOrStr::Int(i) => Ok($name(i as f64)),
                    NumOrStr::Float(f) => Ok($name(f)),
                    NumOrStr::Str(s) => parse_seconds(&s)
                        .map(|secs| $name(secs * $per_second))
                        .map_err(serde::de::Error::custom),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", self.0, $unit)
            }
        }
    };
}

duration_type!(Seconds, "s", 1.0);
duration_type!(Millis, "ms", 1000.0);

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        a: Millis,
        b: Seconds,
    }

    #[test]
    fn numbers_and_strings_agree() {
        let x: T = toml::from_str("a = \"0.5s\"\nb = \"1500ms\"").unwrap();
        let y: T = toml::from_str("a = 500\nb = 1.5").unwrap();
        assert_eq!(x.a, y.a);
        assert_eq!(x.b, y.b);
        assert_eq!(parse_seconds("2m").unwrap(), 120.0);
    }

    #[test]
    fn bad_units_are_explained() {
        assert!(
            parse_seconds("5 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_seconds("12").unwrap_err().contains("no unit"));
        assert!(toml::from_str::<T>("a = true\nb = 1").is_err());
    }
}
