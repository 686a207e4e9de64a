//! The shell-wrapper splitter (docs/language.md#sandbox, `exec` step 1).
//!
//! A script is *plain* when it is words — bare, `'single-quoted'` (all
//! literal) or `"double-quoted"` (where `$`, backtick and `\` are still
//! special, so they make it unknown) — joined by `&&`, `||`, `;` and `|`,
//! with no empty segment and no reserved word in a command's first
//! position. Anything else is *unknown*: the splitter never guesses what a
//! shell would do.

/// The result of splitting a script.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum Script {
    /// The commands, each an argv, in order.
    Plain(Vec<Vec<String>>),
    /// Not a script the splitter can read word for word.
    Unknown,
}

/// Words that may not start a command of a plain script.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "in", "function", "select", "time", "coproc", "{", "}", "!", "[[", "]]",
];

/// Characters that make an unquoted script unknown.
fn special(c: char) -> bool {
    matches!(
        c,
        '$' | '`'
            | '('
            | ')'
            | '\\'
            | '\n'
            | '*'
            | '?'
            | '['
            | ']'
            | '{'
            | '}'
            | '~'
            | '!'
            | '#'
            | '<'
            | '>'
            | '\r'
    )
}

/// Splits a script into commands, or says it is unknown.
pub fn split(script: &str) -> Script {
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    // Ends the current command at an operator; an empty command is unknown.
    fn end_command(words: &mut Vec<String>, commands: &mut Vec<Vec<String>>) -> bool {
        if words.is_empty() {
            return false;
        }
        commands.push(std::mem::take(words));
        true
    }
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Script::Unknown,
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('$' | '`' | '\\') | None => return Script::Unknown,
                        Some(ch) => word.push(ch),
                    }
                }
            }
            '&' | '|' | ';' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                match c {
                    '&' if chars.peek() == Some(&'&') => {
                        chars.next();
                    }
                    '&' => return Script::Unknown, // background job
                    '|' if chars.peek() == Some(&'|') => {
                        chars.next();
                    }
                    '|' if chars.peek() == Some(&'&') => return Script::Unknown, // |&
                    _ => {}
                }
                if !end_command(&mut words, &mut commands) {
                    return Script::Unknown;
                }
            }
            c if special(c) || c.is_control() => return Script::Unknown,
            '=' if !in_word || words.is_empty() => {
                // `NAME=value` in a command's first position is an assignment.
                if words.is_empty() && in_word && is_name(&word) {
                    return Script::Unknown;
                }
                in_word = true;
                word.push(c);
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if !end_command(&mut words, &mut commands) {
        // A trailing operator (`a;`) or an empty script.
        return Script::Unknown;
    }
    if commands
        .iter()
        .any(|cmd| cmd.first().is_some_and(|w| RESERVED.contains(&w.as_str())))
    {
        return Script::Unknown;
    }
    Script::Plain(commands)
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> Vec<Vec<String>> {
        match split(s) {
            Script::Plain(c) => c,
            Script::Unknown => vec![vec!["<unknown>".to_string()]],
        }
    }

    #[test]
    fn plain_scripts_split_into_commands() {
        assert_eq!(
            plain("git status && git log -1"),
            vec![vec!["git", "status"], vec!["git", "log", "-1"]]
        );
        assert_eq!(
            plain("ls | wc -l; echo 'a b'"),
            vec![vec!["ls"], vec!["wc", "-l"], vec!["echo", "a b"]]
        );
        assert_eq!(
            plain("echo \"x y\"||true"),
            vec![vec!["echo", "x y"], vec!["true"]]
        );
        assert_eq!(plain("echo 'it''s'"), vec![vec!["echo", "its"]]);
        assert_eq!(plain("echo 'a\nb'"), vec![vec!["echo", "a\nb"]]);
        assert_eq!(
            plain("git log --format=%H"),
            vec![vec!["git", "log", "--format=%H"]]
        );
    }

    #[test]
    fn anything_else_is_unknown() {
        for s in [
            "",
            "   ",
            "ls;",
            "; ls",
            "ls && && ls",
            "ls > out",
            "cat < in",
            "echo $HOME",
            "echo $(id)",
            "echo `id`",
            "sleep 1 &",
            "ls\nrm x",
            "a=b ls",
            "FOO=1",
            "echo \"$x\"",
            "echo \"a\\b\"",
            "ls *",
            "ls ?",
            "ls ~",
            "echo {a,b}",
            "if true; then ls; fi",
            "for x in a; do ls; done",
            "! ls",
            "echo 'open",
            "echo \"open",
            "(ls)",
            "ls |& cat",
            "echo a # comment",
            "echo \\x",
        ] {
            assert_eq!(split(s), Script::Unknown, "{s:?}");
        }
    }
}
