//! Every key the config file accepts, listed from the [`raw`](super::raw) structs themselves:
//! a deserializer that walks each struct's declared fields and records their paths and kinds.
//! The key index in docs/configuration.md is generated from this list, and a test fails when
//! the two disagree (regenerate with `NVSOAK_UPDATE_CONFIG_DOC=1 cargo test --release --lib
//! config::keys`).

use std::cell::RefCell;
use std::fmt;

use serde::Deserialize;
use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

/// One key: its path (`target[].phase[].job.bs`) and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub path: String,
    pub kind: &'static str,
}

/// Every key, in declaration order, tables before their keys.
pub fn list() -> Vec<Key> {
    let found = RefCell::new(Vec::new());
    // The walk hands every visitor a plausible value, so it builds a config; only the paths
    // it recorded on the way matter.
    let _ = super::raw::RawConfig::deserialize(Walk {
        path: "",
        found: &found,
    });
    found.into_inner()
}

#[derive(Debug)]
struct WalkError(String);

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

impl de::Error for WalkError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        WalkError(msg.to_string())
    }
}

#[derive(Clone, Copy)]
struct Walk<'a> {
    path: &'a str,
    found: &'a RefCell<Vec<Key>>,
}

impl<'a> Walk<'a> {
    fn record(&self, kind: &'static str) {
        if !self.path.is_empty() {
            self.found.borrow_mut().push(Key {
                path: self.path.to_string(),
                kind,
            });
        }
    }
}

/// A walk that owns its path (the path of a field or an element).
struct Owned<'a> {
    path: String,
    found: &'a RefCell<Vec<Key>>,
}

impl<'de, 'a> Deserializer<'de> for Walk<'a> {
    type Error = WalkError;

    /// A value whose type decides at run time (`Scalar`, a string or a list): written as a
    /// string, the one spelling all of them take.
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        self.record("string or number");
        v.visit_str("")
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        self.record("boolean");
        v.visit_bool(false)
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        self.record("string");
        v.visit_str("")
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        self.deserialize_str(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        v.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        let at = self.found.borrow().len();
        self.record("list");
        let elem = format!("{}[]", self.path);
        let r = v.visit_seq(One(Some(Owned {
            path: elem.clone(),
            found: self.found,
        })));
        let mut found = self.found.borrow_mut();
        let of_tables = found
            .iter()
            .skip(at)
            .any(|k| k.path.starts_with(&format!("{elem}.")));
        // A list's values are not keys of their own.
        found.retain(|k| k.path != elem);
        if of_tables && let Some(k) = found.get_mut(at).filter(|k| k.path == self.path) {
            k.kind = "list of tables";
        }
        r
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, WalkError> {
        // A list element's table is the list's; it is not recorded again.
        if !self.path.ends_with("[]") {
            self.record("table");
        }
        let prefix = if self.path.is_empty() {
            String::new()
        } else {
            format!("{}.", self.path)
        };
        v.visit_map(Fields {
            fields: fields.iter(),
            prefix,
            next: None,
            found: self.found,
        })
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
        unit unit_struct newtype_struct tuple tuple_struct map enum identifier ignored_any
    }
}

impl<'de, 'a> Deserializer<'de> for Owned<'a> {
    type Error = WalkError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        Walk {
            path: &self.path,
            found: self.found,
        }
        .deserialize_any(v)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        Walk {
            path: &self.path,
            found: self.found,
        }
        .deserialize_bool(v)
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        Walk {
            path: &self.path,
            found: self.found,
        }
        .deserialize_str(v)
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        self.deserialize_str(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        v.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, WalkError> {
        Walk {
            path: &self.path,
            found: self.found,
        }
        .deserialize_seq(v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, WalkError> {
        Walk {
            path: &self.path,
            found: self.found,
        }
        .deserialize_struct(name, fields, v)
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
        unit unit_struct newtype_struct tuple tuple_struct map enum identifier ignored_any
    }
}

/// A list with one element, walked at the element's path.
struct One<'a>(Option<Owned<'a>>);

impl<'de, 'a> SeqAccess<'de> for One<'a> {
    type Error = WalkError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, WalkError> {
        match self.0.take() {
            Some(w) => seed.deserialize(w).map(Some),
            None => Ok(None),
        }
    }
}

/// A table holding every declared field once.
struct Fields<'a> {
    fields: std::slice::Iter<'static, &'static str>,
    prefix: String,
    next: Option<&'static str>,
    found: &'a RefCell<Vec<Key>>,
}

impl<'de, 'a> MapAccess<'de> for Fields<'a> {
    type Error = WalkError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, WalkError> {
        match self.fields.next() {
            Some(f) => {
                self.next = Some(f);
                seed.deserialize((*f).into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, WalkError> {
        let field = self.next.take().unwrap_or_default();
        seed.deserialize(Owned {
            path: format!("{}{field}", self.prefix),
            found: self.found,
        })
    }
}

/// The key index as written in docs/configuration.md, between its markers.
pub fn markdown() -> String {
    let mut out = String::from("| key | holds |\n|---|---|\n");
    for k in list() {
        out.push_str(&format!("| `{}` | {} |\n", k.path, k.kind));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- config-keys:begin (generated: NVSOAK_UPDATE_CONFIG_DOC=1 cargo test --release --lib config::keys) -->\n";
    const END: &str = "<!-- config-keys:end -->";

    #[test]
    fn the_walk_finds_keys_at_every_depth() {
        let keys = list();
        let has = |p: &str, kind: &str| keys.iter().any(|k| k.path == p && k.kind == kind);
        assert!(has("exporter", "table"), "{keys:?}");
        assert!(has("exporter.listen", "string or number"), "{keys:?}");
        assert!(has("health.enabled", "boolean"), "{keys:?}");
        assert!(has("health.include", "list"), "{keys:?}");
        assert!(has("health.device", "list of tables"), "{keys:?}");
        assert!(has("health.device[].match", "string"), "{keys:?}");
        assert!(has("target", "list of tables"), "{keys:?}");
        assert!(has("target[].loop", "boolean"), "{keys:?}");
        assert!(
            has("target[].phase[].job.bs", "string or number"),
            "{keys:?}"
        );
        assert!(
            has("target[].gates.verify_errors", "string or number"),
            "{keys:?}"
        );
        assert!(
            !keys.iter().any(|k| k.path == "health.include[]"),
            "a list's values are not keys: {keys:?}"
        );
        // Every field of every raw struct, and nothing twice.
        let mut paths: Vec<&str> = keys.iter().map(|k| k.path.as_str()).collect();
        let n = paths.len();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), n, "a key listed twice");
        assert!(n > 90, "only {n} keys");
    }

    /// docs/configuration.md's key index is the code's, and every key the code accepts has a
    /// row in the hand-written tables (named by its own name or its dotted path).
    #[test]
    fn the_documented_keys_are_the_code_s() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
        let text = std::fs::read_to_string(path).expect("docs/configuration.md");
        let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
            panic!("docs/configuration.md lacks the generated key index markers:\n{BEGIN}{END}");
        };
        let want = markdown();
        let have = &text[b + BEGIN.len()..e];
        if have != want {
            if std::env::var_os("NVSOAK_UPDATE_CONFIG_DOC").is_some() {
                let new = format!("{}{BEGIN}{want}{}", &text[..b], &text[e..]);
                std::fs::write(path, new).expect("writing docs/configuration.md");
            } else {
                panic!(
                    "docs/configuration.md's key index differs from the config structs; \
                     regenerate with NVSOAK_UPDATE_CONFIG_DOC=1 cargo test --release --lib \
                     config::keys\nwant:\n{want}"
                );
            }
        }
        // The gates' rows live with the verdict they decide.
        let verdict =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/verdict.md"))
                .expect("docs/verdict.md");
        let prose = format!("{}{}{verdict}", &text[..b], &text[e..]);
        let missing: Vec<String> = list()
            .into_iter()
            .filter(|k| k.kind != "table" && k.kind != "list of tables")
            .filter(|k| {
                let leaf = k.path.rsplit(['.', ']']).next().unwrap_or(&k.path);
                let dotted = k.path.replace("[]", "");
                // `name`, `name = …` or the dotted path.
                ![
                    format!("`{leaf}`"),
                    format!("`{leaf} = "),
                    format!("`{dotted}`"),
                ]
                .iter()
                .any(|p| prose.contains(p))
            })
            .map(|k| k.path)
            .collect();
        assert!(
            missing.is_empty(),
            "keys the code accepts that docs/configuration.md does not describe: {missing:?}"
        );
    }
}
