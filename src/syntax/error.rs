//! Errors of the syntax phase (parsing and building the AST).

use thiserror::Error;

/// What can be wrong with the text of a policy file, before any meaning is
/// assigned. Each becomes a [`crate::diag::Diagnostic`] with the span of the
/// offending text.
#[derive(Clone, Debug, Eq, PartialEq, Error)]
#[non_exhaustive]
pub enum SyntaxError {
    #[error("unexpected {found}; expected {expected}")]
    Unexpected {
        found: String,
        expected: String,
        help: Option<String>,
    },
    #[error("unknown statement `{found}` in {context}")]
    UnknownStatement {
        found: String,
        context: &'static str,
        expected: Vec<&'static str>,
    },
    #[error("unknown {what} `{found}`")]
    UnknownValue {
        what: &'static str,
        found: String,
        expected: Vec<&'static str>,
    },
    #[error("`{text}` is not a valid IP address")]
    InvalidIp { text: String, help: String },
    #[error("`{text}` is not a valid CIDR prefix")]
    InvalidCidr { text: String, help: String },
    #[error("`{text}` has host bits set")]
    CidrHostBits { text: String, network: String },
    #[error("{message}")]
    InvalidPort {
        message: String,
        help: Option<String>,
    },
    #[error("invalid escape in string: {message}")]
    BadEscape { message: String },
    #[error("non-ASCII {what} `{text}` must be quoted")]
    UnquotedNonAscii { what: &'static str, text: String },
    #[error("{message}")]
    InvalidQuery {
        message: String,
        help: Option<String>,
    },
    #[error("{message}")]
    InvalidProperty {
        message: String,
        help: Option<String>,
    },
    #[error("unterminated string")]
    UnterminatedString,
    #[error("this `{{` is never closed")]
    UnclosedBrace { help: String },
    #[error("the parser could not understand this text")]
    Internal,
}

impl SyntaxError {
    /// The stable diagnostic code.
    pub fn code(&self) -> &'static str {
        match self {
            SyntaxError::Unexpected { .. } => "syntax_error",
            SyntaxError::UnknownStatement { .. } => "unknown_statement",
            SyntaxError::UnknownValue { what, .. } => match *what {
                "permission" => "unknown_permission",
                "section" => "unknown_section",
                _ => "unknown_value",
            },
            SyntaxError::InvalidIp { .. } => "invalid_address",
            SyntaxError::InvalidCidr { .. } => "invalid_cidr",
            SyntaxError::CidrHostBits { .. } => "cidr_host_bits",
            SyntaxError::InvalidPort { .. } => "invalid_port",
            SyntaxError::BadEscape { .. } => "bad_escape",
            SyntaxError::UnquotedNonAscii { .. } => "unquoted_non_ascii",
            SyntaxError::InvalidQuery { .. } => "invalid_query",
            SyntaxError::InvalidProperty { .. } => "invalid_property",
            SyntaxError::UnterminatedString => "unterminated_string",
            SyntaxError::UnclosedBrace { .. } => "unclosed_brace",
            SyntaxError::Internal => "internal",
        }
    }

    /// The help line.
    pub fn help(&self) -> Option<String> {
        use crate::diag::{did_you_mean, one_of};
        match self {
            SyntaxError::Unexpected { help, .. } => help.clone(),
            SyntaxError::UnknownStatement { found, expected, .. } | SyntaxError::UnknownValue { found, expected, .. } => {
                did_you_mean(found, expected.iter().copied())
                    .or_else(|| synonym(found, expected))
                    .or_else(|| Some(format!("expected {}", one_of(expected))))
            }
            SyntaxError::InvalidIp { help, .. } | SyntaxError::InvalidCidr { help, .. } => Some(help.clone()),
            SyntaxError::CidrHostBits { network, .. } => Some(format!("did you mean `{network}`?")),
            SyntaxError::InvalidPort { help, .. } => help.clone(),
            SyntaxError::BadEscape { .. } => {
                Some("strings take `\\\"`, `\\\\`, `\\n`, `\\t` and `\\u{HEX}`; use r\"...\" for no escapes".into())
            }
            SyntaxError::UnquotedNonAscii { text, .. } => Some(format!("write it as \"{text}\"")),
            SyntaxError::InvalidQuery { help, .. } | SyntaxError::InvalidProperty { help, .. } => {
                help.clone()
            }
            SyntaxError::UnterminatedString => Some(
                "close it with `\"` on the same line: a string cannot span lines (write `\\n` for a line break)".into(),
            ),
            SyntaxError::UnclosedBrace { help } => Some(help.clone()),
            SyntaxError::Internal => Some("please report this with the file that caused it".into()),
        }
    }
}

/// Words other systems use for a keyword expected here (`allow host x`,
/// `deny subnet 10.0.0.0/8`, `permit domain x`): the keyword, as a
/// did-you-mean. Only a keyword the grammar expects at this place is named.
pub(crate) fn synonym(found: &str, keywords: &[&str]) -> Option<String> {
    let word = found.to_ascii_lowercase();
    let keyword = match word.as_str() {
        "host" | "hostname" | "hosts" | "fqdn" | "url" | "name" | "domains" => "domain",
        "address" | "addr" | "ipv4" | "ipv6" | "ips" => "ip",
        "subnet" | "network" | "net" | "prefix" | "range" => "cidr",
        "unix" | "sock" | "unix_socket" => "socket",
        "permit" | "accept" | "pass" => "allow",
        "block" | "reject" | "drop" | "refuse" => "deny",
        _ => return None,
    };
    keywords
        .contains(&keyword)
        .then(|| format!("did you mean `{keyword}`? (gatehouse calls it `{keyword}`)"))
}
