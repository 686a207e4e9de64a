//! Reading TOML values with their lines, and the notes about them.

use toml::de::{DeTable, DeValue};

use crate::import::{Input, Note, Severity};

pub(super) type Spanned<T> = toml::Spanned<T>;

/// A value read from the TOML, with the line it was written on and the
/// dotted key that holds it.
#[derive(Clone, Debug)]
pub(super) struct At<T> {
    pub value: T,
    pub line: usize,
    pub key: String,
}

impl<T> At<T> {
    /// Another value read at the same place.
    pub fn with<U>(&self, value: U) -> At<U> {
        At {
            value,
            line: self.line,
            key: self.key.clone(),
        }
    }
    /// The output comment naming where a statement came from.
    pub fn comment(&self, input: Input) -> String {
        match input {
            Input::Requirements => format!("  # requirements: {} (line {})", self.key, self.line),
            Input::Profile => format!("  # profile file: {} (line {})", self.key, self.line),
            Input::Config | Input::Settings(_) => {
                format!("  # {} (line {})", self.key, self.line)
            }
        }
    }
}

/// A domain, address or socket with its effect (`true` = allow).
pub(super) type Effects = Vec<(At<String>, bool)>;

pub(super) struct Reader<'t> {
    pub text: &'t str,
    pub input: Input,
    pub notes: Vec<Note>,
}

impl<'t> Reader<'t> {
    pub fn new(text: &'t str, input: Input) -> Self {
        Reader {
            text,
            input,
            notes: Vec::new(),
        }
    }
    pub fn line(&self, offset: usize) -> usize {
        self.text
            .get(..offset)
            .map_or(1, |t| t.matches('\n').count() + 1)
    }
    pub fn line_of<T>(&self, v: &Spanned<T>) -> usize {
        self.line(v.span().start)
    }
    pub fn warn(&mut self, line: usize, message: String) {
        self.notes
            .push(Note::new(Severity::Warning, self.input, line, message));
    }
    pub fn error(&mut self, line: usize, message: String) {
        self.notes
            .push(Note::new(Severity::Error, self.input, line, message));
    }

    /// Parses the text, or reports why not.
    pub fn parse(&mut self) -> Option<Spanned<DeTable<'t>>> {
        match DeTable::parse(self.text) {
            Ok(t) => Some(t),
            Err(e) => {
                let line = e.span().map_or(1, |s| self.line(s.start));
                self.error(line, format!("not valid TOML: {}", e.message().trim()));
                None
            }
        }
    }

    pub fn table<'a, 'd>(
        &mut self,
        key: &str,
        v: &'a Spanned<DeValue<'d>>,
    ) -> Option<&'a DeTable<'d>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                let line = self.line_of(v);
                self.error(line, format!("`{key}` must be a table"));
                None
            }
        }
    }

    pub fn string(
        &mut self,
        key: &str,
        v: &Spanned<DeValue<'_>>,
        allowed: &[&str],
    ) -> Option<At<String>> {
        let line = self.line_of(v);
        match v.get_ref() {
            DeValue::String(s) if allowed.is_empty() || allowed.contains(&s.as_ref()) => Some(At {
                value: s.to_string(),
                line,
                key: key.to_string(),
            }),
            DeValue::String(s) => {
                let hint = crate::diag::did_you_mean(s, allowed.iter().copied())
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                self.error(
                    line,
                    format!(
                        "`{key}` = \"{s}\" is not one of {}{hint}",
                        crate::diag::one_of(allowed)
                    ),
                );
                None
            }
            _ => {
                self.error(line, format!("`{key}` must be a string"));
                None
            }
        }
    }

    pub fn boolean(&mut self, key: &str, v: &Spanned<DeValue<'_>>) -> Option<At<bool>> {
        let line = self.line_of(v);
        match v.get_ref() {
            DeValue::Boolean(b) => Some(At {
                value: *b,
                line,
                key: key.to_string(),
            }),
            _ => {
                self.error(line, format!("`{key}` must be true or false"));
                None
            }
        }
    }

    pub fn strings(
        &mut self,
        key: &str,
        v: &Spanned<DeValue<'_>>,
        allowed: &[&str],
    ) -> Vec<At<String>> {
        match v.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .filter_map(|i| self.string(key, i, allowed))
                .collect(),
            _ => {
                let line = self.line_of(v);
                self.error(line, format!("`{key}` must be a list of strings"));
                Vec::new()
            }
        }
    }

    /// `{ "name" = "allow" | "deny", ... }`.
    pub fn effects(&mut self, key: &str, v: &Spanned<DeValue<'_>>) -> Effects {
        let DeValue::Table(t) = v.get_ref() else {
            let line = self.line_of(v);
            self.error(
                line,
                format!("`{key}` must be a table of \"name\" = \"allow\" or \"deny\""),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, val) in t.iter() {
            let name = k.get_ref().to_string();
            if let Some(e) = self.string(&format!("{key}.\"{name}\""), val, &["allow", "deny"]) {
                out.push((
                    At {
                        value: name,
                        line: e.line,
                        key: e.key,
                    },
                    e.value == "allow",
                ));
            }
        }
        out
    }

    /// A list of names, each with one effect.
    pub fn listed(&mut self, key: &str, v: &Spanned<DeValue<'_>>, allow: bool) -> Effects {
        self.strings(key, v, &[])
            .into_iter()
            .map(|a| (a, allow))
            .collect()
    }

    /// An unknown key: a warning with a did-you-mean from the known keys.
    pub fn unknown(&mut self, line: usize, key: &str, known: &[&str]) {
        let last = key.rsplit('.').next().unwrap_or(key);
        let hint = crate::diag::did_you_mean(last, known.iter().copied())
            .map(|h| format!(" ({h})"))
            .unwrap_or_default();
        self.warn(line, format!("unknown key `{key}` ignored{hint}"));
    }
}

/// The value of `key` in a table.
pub(super) fn get<'a, 'd>(t: &'a DeTable<'d>, key: &str) -> Option<&'a Spanned<DeValue<'d>>> {
    t.iter()
        .find(|(k, _)| k.get_ref().as_ref() == key)
        .map(|(_, v)| v)
}
