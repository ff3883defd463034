//! Deserializing the merged config (file + environment) into the [`raw`](super::raw) structs
//! with an error type of our own, so a config error is built from what the deserializer knows
//! (the failing key's path from `serde_path_to_error`, the unknown key and the keys known
//! there, the type found and the type expected) rather than parsed out of serde's message text.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

/// The merged config as plain data, every value as the file or the environment gave it
/// (a `nan` stays a float: JSON's value type would turn it into nothing).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Value>),
    Map(Vec<(String, Value)>),
}

impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a config value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                <Value as serde::Deserialize>::deserialize(d)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::Uint(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Str(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
                Ok(Value::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element()? {
                    out.push(v);
                }
                Ok(Value::Seq(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Value::Map(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// What went wrong at one key, as the deserializer reported it.
#[derive(Debug, Clone, PartialEq)]
pub enum DeError {
    /// A key the struct does not have, and the keys it does have.
    UnknownField {
        field: String,
        expected: &'static [&'static str],
    },
    /// A value of the wrong kind: `found` in TOML words (`integer 5`), `expected` as serde
    /// describes the type.
    InvalidType { found: String, expected: String },
    /// Anything else a `Deserialize` impl said (an untagged enum matching no variant).
    Custom(String),
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeError::UnknownField { field, .. } => write!(f, "unknown key \"{field}\""),
            DeError::InvalidType { found, expected } => {
                write!(f, "expected {}, found {found}", toml_words(expected))
            }
            DeError::Custom(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::Custom(msg.to_string())
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        DeError::UnknownField {
            field: field.to_string(),
            expected,
        }
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError::InvalidType {
            found: found_words(&unexp),
            expected: exp.to_string(),
        }
    }
}

/// A value as a TOML user would name it.
fn found_words(u: &de::Unexpected<'_>) -> String {
    use de::Unexpected as U;
    match u {
        U::Bool(b) => format!("boolean {b}"),
        U::Signed(i) => format!("integer {i}"),
        U::Unsigned(i) => format!("integer {i}"),
        U::Float(x) => format!("float {x}"),
        U::Str(s) => format!("string {s:?}"),
        U::Seq => "a list".into(),
        U::Map => "a table".into(),
        U::Unit => "nothing".into(),
        other => other.to_string(),
    }
}

/// serde's description of a type in TOML words: a derived struct (`struct RawJob`) is a
/// table, a sequence a list.
fn toml_words(expected: &str) -> String {
    if expected.starts_with("struct ") {
        return "a table".into();
    }
    match expected {
        "a sequence" => "a list".into(),
        "a map" => "a table".into(),
        "path string" => "a path (a string)".into(),
        other => other.to_string(),
    }
}

/// Deserialize `T` from `value`; on an error, the path of the key it is about
/// (`target[0].phase[1].profle`: for an unknown key the key itself) and what went wrong.
pub fn from_value<T: de::DeserializeOwned>(value: &Value) -> Result<T, (String, DeError)> {
    serde_path_to_error::deserialize(ValueDe(value)).map_err(|e| {
        let path = e.path().to_string();
        // The crate writes "." for the top level.
        let path = if path == "." { String::new() } else { path };
        (path, e.into_inner())
    })
}

/// A deserializer over a borrowed JSON value whose errors are [`DeError`].
struct ValueDe<'a>(&'a Value);

impl<'de, 'a> Deserializer<'de> for ValueDe<'a> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Int(i) => v.visit_i64(*i),
            Value::Uint(u) => v.visit_u64(*u),
            Value::Float(x) => v.visit_f64(*x),
            Value::Str(s) => v.visit_str(s),
            Value::Seq(a) => v.visit_seq(Seq(a.iter())),
            Value::Map(m) => v.visit_map(Map {
                it: m.iter(),
                value: None,
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

struct Seq<'a>(std::slice::Iter<'a, Value>);

impl<'de, 'a> SeqAccess<'de> for Seq<'a> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        self.0
            .next()
            .map(|v| seed.deserialize(ValueDe(v)))
            .transpose()
    }
}

struct Map<'a> {
    it: std::slice::Iter<'a, (String, Value)>,
    value: Option<&'a Value>,
}

impl<'de, 'a> MapAccess<'de> for Map<'a> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.it.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(k.as_str().into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, DeError> {
        match self.value.take() {
            Some(v) => seed.deserialize(ValueDe(v)),
            None => Err(de::Error::custom("a value without a key")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::raw::RawConfig;

    fn err(json: &str) -> (String, DeError) {
        let v: Value = serde_json::from_str(json).expect("json");
        match from_value::<RawConfig>(&v) {
            Ok(_) => panic!("accepted {json}"),
            Err(e) => e,
        }
    }

    #[test]
    fn an_unknown_key_comes_with_its_path_and_the_keys_known_there() {
        let (path, e) = err(r#"{"target":[{"phase":[{"kind":"soak"},{"profle":"x"}]}]}"#);
        assert_eq!(path, "target[0].phase[1].profle");
        match e {
            DeError::UnknownField { field, expected } => {
                assert_eq!(field, "profle");
                assert!(expected.contains(&"profile"), "{expected:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrong_type_names_what_was_found_and_what_was_expected() {
        let (path, e) = err(r#"{"target":[{"phase":[{"job":5}]}]}"#);
        assert_eq!(path, "target[0].phase[0].job");
        assert_eq!(e.to_string(), "expected a table, found integer 5");
        let (path, e) = err(r#"{"health":{"include":"nvme0"}}"#);
        assert_eq!(path, "health.include");
        assert_eq!(e.to_string(), "expected a list, found string \"nvme0\"");
        let (path, e) = err(r#"{"target":[{"direct":"maybe"}]}"#);
        assert_eq!(path, "target[0].direct");
        assert_eq!(e.to_string(), "expected a boolean, found string \"maybe\"");
    }

    #[test]
    fn allow_destroy_is_a_string_or_a_list_of_strings() {
        let (path, e) = err(r#"{"target":[{"allow_destroy":5}]}"#);
        assert_eq!(path, "target[0].allow_destroy");
        assert_eq!(
            e.to_string(),
            "expected a string or a list of strings, found integer 5"
        );
        let (path, e) = err(r#"{"target":[{"allow_destroy":["S1",5]}]}"#);
        assert_eq!(path, "target[0].allow_destroy[1]");
        assert_eq!(e.to_string(), "expected a string, found integer 5");
    }

    #[test]
    fn a_top_level_unknown_key_has_no_parent() {
        let (path, e) = err(r#"{"exportr":{}}"#);
        assert_eq!(path, "exportr");
        assert!(matches!(e, DeError::UnknownField { ref field, .. } if field == "exportr"));
    }

    #[test]
    fn a_valid_value_deserializes() {
        let v: Value = serde_json::from_str(
            r#"{"state":{"dir":"/tmp/x"},"health":{"enabled":false,"include":["nvme0"]},
                "target":[{"name":"a","path":"/tmp/a","allow_destroy":["S1","S2"],"size":"1G"}]}"#,
        )
        .expect("json");
        let raw: RawConfig = from_value(&v).expect("valid");
        assert_eq!(raw.health.include, vec!["nvme0".to_string()]);
        assert_eq!(raw.target.len(), 1);
        assert!(matches!(
            raw.target[0].allow_destroy,
            Some(crate::config::raw::OneOrMany::Many(ref v)) if v.len() == 2
        ));
    }
}
