//! The shell-word reader (docs/language.md#sandbox, `exec` step 1): the
//! words a script may run, read as a POSIX shell or bash would pass them
//! on, at every depth of quoting.
//!
//! A script is read as bash reads it: quotes are removed (`r'm'`, `r""m`
//! and `r\m` are `rm`), `$'…'` is decoded, brace expansion is done
//! (`{rm,-rf,x}` is three words), and the bodies of `$(…)`, backticks,
//! `<(…)`, `${…}` and `$((…))` are read as scripts of their own. Every
//! word's value is then read again as a script — the shell passes it on, and
//! whatever runs it next (`bash -lc "…"`, `sh -c '…'`, `xargs sh -c`) splits
//! it again — so that `bash -lc "bash -lc \"r'm' -rf x\""` shows `rm`, `-rf`
//! and `x`. The words come in the order the shell would meet them: a
//! substitution's words before the word that holds it, a word's own value
//! before the words read out of it.
//!
//! **Shell text** is what surely runs as shell code: the script itself, the
//! body of a substitution, and every word that a shell (`bash`, `sh`,
//! `dash`, `./bash`, …) is given in the same command. Where a shell text
//! cannot be decoded — an unbalanced quote or substitution, a here-document,
//! `eval`, or an expansion (`$X`, `${…}`, `$(…)`, backticks) where a command
//! is named or handed to a shell — the reader says [`Word::Opaque`]: it may
//! hold any command. The value of any other word is only read for the words
//! it may hold; where it is not valid shell (`"don't"`), the rest of it is
//! split at blanks and nothing is opaque.
//!
//! Bounded: at most [`MAX_DEPTH`] readings inside one another, at most
//! [`MAX_WORDS`] words in all, at most [`MAX_BRACE`] words from one brace
//! expansion; past a bound the reader says [`Word::Opaque`].
//!
//! The reader is checked against a real bash (tests/shell_words.rs): bash
//! runs generated scripts with argv-recording programs on its `PATH`, and
//! every argv it ran must show, in order, among the words read here.

/// One item of what a script may run, in the order the shell meets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Word {
    /// A word as the shell passes it on.
    Text(String),
    /// Text that cannot be decoded: it may run any command with any words.
    Opaque,
}

/// Readings inside one another (a word's value read as a script, a
/// substitution's body) before the reader gives up.
pub const MAX_DEPTH: usize = 8;
/// Words read from one script, all depths together.
pub const MAX_WORDS: usize = 4096;
/// Words one brace expansion may make.
pub const MAX_BRACE: usize = 256;

/// Shells: a word after one of these in a command is shell text.
pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "yash", "busybox",
];

/// Programs that run their arguments as a command: every later word of the
/// command is in command position for the reader.
const RUNNERS: &[&str] = &[
    "sudo", "doas", "env", "timeout", "nice", "nohup", "ionice", "stdbuf", "time", "command",
    "exec", "xargs", "builtin", "setsid", "chroot", "su", "runuser", "watch", "flock",
];

/// Reserved words after which a command's name still follows.
const KEEP_COMMAND: &[&str] = &[
    "if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "fi", "done", "esac",
    "time", "coproc",
];

/// Reads `script` as shell text: every word it may run, in order.
pub fn read(script: &str) -> Vec<Word> {
    let mut r = Reader { out: Vec::new() };
    r.text(script, 0, true);
    r.out
}

/// Only the [`Word::Text`] words of [`read`], for callers that look for
/// paths and names (an opaque part holds none that can be named).
pub fn texts(script: &str) -> Vec<String> {
    read(script)
        .into_iter()
        .filter_map(|w| match w {
            Word::Text(t) => Some(t),
            Word::Opaque => None,
        })
        .collect()
}

mod decode;

use decode::{ansi_c, brace_expand};

/// Why a piece of text could not be decoded.
#[derive(Debug)]
pub(crate) struct Undecodable;

/// A character of a word and whether it was quoted (quoted characters take
/// no part in brace expansion).
pub(crate) type Ch = (char, bool);

/// A word being read.
#[derive(Default)]
struct Raw {
    chars: Vec<Ch>,
    /// Holds a parameter, command or arithmetic expansion.
    expansion: bool,
    /// Was anything quoted (an empty `''` is still a word).
    quoted: bool,
}

/// The state of the command being read.
#[derive(Default)]
struct Command {
    /// The command's name has been read.
    named: bool,
    /// Later words are in command position (after `sudo`, `env`, ...).
    runner: bool,
    /// Later words are shell text (after `bash`, `sh`, ...).
    shell: bool,
    /// The next word is not a command (after `for`, `case`, `select`,
    /// `function`).
    skip_next: bool,
}

struct Reader {
    out: Vec<Word>,
}

impl Reader {
    fn push(&mut self, w: Word) {
        if self.out.len() < MAX_WORDS {
            self.out.push(w);
        } else if self.out.last() != Some(&Word::Opaque) {
            // Past the bound, one opaque word says that more was there.
            self.out.push(Word::Opaque);
        }
    }

    /// Reads `text` at `depth`; `shell` says whether it surely runs as
    /// shell code (see the module's doc).
    fn text(&mut self, text: &str, depth: usize, shell: bool) {
        if depth > MAX_DEPTH || self.out.len() >= MAX_WORDS {
            self.push(Word::Opaque);
            return;
        }
        let chars: Vec<char> = text.chars().collect();
        if self.script(&chars, depth, shell).is_err() {
            if shell {
                self.push(Word::Opaque);
            } else {
                // Not valid shell, and not surely run as shell: keep what
                // was read and split the whole text at blanks besides.
                for w in text.split_whitespace() {
                    self.push(Word::Text(w.to_string()));
                }
            }
        }
    }

    fn script(&mut self, s: &[char], depth: usize, shell: bool) -> Result<(), Undecodable> {
        let mut i = 0;
        let mut cmd = Command::default();
        let mut redirect_target = false;
        while let Some(&c) = s.get(i) {
            if self.out.len() >= MAX_WORDS {
                self.push(Word::Opaque);
                return Ok(());
            }
            match c {
                ' ' | '\t' => i += 1,
                '\n' | ';' | '|' | '(' | ')' => {
                    i += 1;
                    // `;;`, `||`, `|&`, `;&` are one operator each: the
                    // same effect, a new command.
                    cmd = Command::default();
                    redirect_target = false;
                }
                '&' if s.get(i + 1) == Some(&'>') => {
                    i += 2;
                    if s.get(i) == Some(&'>') {
                        i += 1;
                    }
                    redirect_target = true;
                }
                '&' => {
                    i += 1;
                    cmd = Command::default();
                    redirect_target = false;
                }
                '<' | '>' if s.get(i + 1) == Some(&'(') => {
                    // Process substitution: a word.
                    i = self.word(s, i, depth, shell, &mut cmd, &mut redirect_target)?;
                }
                '<' | '>' => {
                    let heredoc =
                        c == '<' && s.get(i + 1) == Some(&'<') && s.get(i + 2) != Some(&'<');
                    if heredoc && shell {
                        return Err(Undecodable);
                    }
                    i += 1;
                    while s
                        .get(i)
                        .is_some_and(|n| matches!(n, '<' | '>' | '&' | '|' | '-'))
                    {
                        i += 1;
                    }
                    redirect_target = true;
                }
                '#' => {
                    // A comment, to the end of the line.
                    while s.get(i).is_some_and(|&n| n != '\n') {
                        i += 1;
                    }
                }
                _ => {
                    i = self.word(s, i, depth, shell, &mut cmd, &mut redirect_target)?;
                }
            }
        }
        Ok(())
    }

    /// Reads the word starting at `i` and what it holds; returns where it
    /// ends.
    fn word(
        &mut self,
        s: &[char],
        mut i: usize,
        depth: usize,
        shell: bool,
        cmd: &mut Command,
        redirect_target: &mut bool,
    ) -> Result<usize, Undecodable> {
        let mut raw = Raw::default();
        while let Some(&c) = s.get(i) {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | ')' => break,
                '(' => break,
                '<' | '>' if s.get(i + 1) == Some(&'(') => {
                    let end = matching(s, i + 1, '(', ')').ok_or(Undecodable)?;
                    self.body(s.get(i + 2..end).unwrap_or_default(), depth)?;
                    raw.expansion = true;
                    i = end + 1;
                }
                '<' | '>' => break,
                '\'' => {
                    raw.quoted = true;
                    i += 1;
                    loop {
                        match s.get(i) {
                            Some('\'') => break,
                            Some(&q) => raw.chars.push((q, true)),
                            None => return Err(Undecodable),
                        }
                        i += 1;
                    }
                    i += 1;
                }
                '"' => {
                    raw.quoted = true;
                    i = self.double_quoted(s, i + 1, depth, &mut raw)?;
                }
                '\\' => {
                    match s.get(i + 1) {
                        Some('\n') => {}
                        Some(&n) => raw.chars.push((n, true)),
                        None => raw.chars.push(('\\', true)),
                    }
                    i += 2;
                }
                '$' if s.get(i + 1) == Some(&'\'') => {
                    raw.quoted = true;
                    i = ansi_c(s, i + 2, &mut raw.chars)?;
                }
                '$' if s.get(i + 1) == Some(&'"') => {
                    raw.quoted = true;
                    i = self.double_quoted(s, i + 2, depth, &mut raw)?;
                }
                '$' => i = self.dollar(s, i, depth, &mut raw)?,
                '`' => i = self.backtick(s, i, depth, &mut raw, false)?,
                c => {
                    raw.chars.push((c, false));
                    i += 1;
                }
            }
        }
        // A file descriptor before a redirection (`2>x`) is no word.
        let fd = !raw.quoted
            && !raw.chars.is_empty()
            && raw.chars.iter().all(|(c, _)| c.is_ascii_digit())
            && s.get(i).is_some_and(|n| matches!(n, '<' | '>'));
        if !fd {
            self.finish(s, raw, depth, shell, cmd, redirect_target)?;
        }
        Ok(i)
    }

    /// What a finished word means: its values, its place in the command,
    /// and the words its values hold.
    fn finish(
        &mut self,
        whole: &[char],
        raw: Raw,
        depth: usize,
        shell: bool,
        cmd: &mut Command,
        redirect_target: &mut bool,
    ) -> Result<(), Undecodable> {
        let literal: String = raw.chars.iter().map(|(c, _)| c).collect();
        if std::mem::take(redirect_target) {
            if !literal.is_empty() && !literal.chars().eq(whole.iter().copied()) {
                self.value(literal, depth, false);
            }
            return Ok(());
        }
        let assignment = !cmd.named && is_assignment(&raw.chars);
        let command_position = !cmd.named && !cmd.skip_next && !assignment;
        let unquoted = |w: &str| !raw.quoted && !raw.expansion && literal == w;
        if shell && raw.expansion && (command_position || cmd.runner || cmd.shell) {
            // A command, or a shell's script, known only when it runs.
            return Err(Undecodable);
        }
        let values = if assignment || raw.expansion {
            vec![literal.clone()]
        } else {
            match brace_expand(&raw.chars) {
                Some(v) => v,
                None if shell => return Err(Undecodable),
                None => vec![literal.clone()],
            }
        };
        if shell && (command_position || cmd.runner) && values.iter().any(|v| v == "eval") {
            return Err(Undecodable);
        }
        if cmd.skip_next {
            cmd.skip_next = false;
        } else if command_position {
            if KEEP_COMMAND.iter().any(|w| unquoted(w)) {
                // Still before the command's name.
            } else if ["for", "case", "select", "function"]
                .iter()
                .any(|w| unquoted(w))
            {
                cmd.skip_next = true;
            } else {
                cmd.named = true;
            }
        }
        for (k, v) in values.into_iter().enumerate() {
            let given_to_shell = cmd.shell;
            let name = super::known_safe::basename(&v);
            if cmd.named && (command_position && k == 0 || cmd.runner) && RUNNERS.contains(&name) {
                cmd.runner = true;
            }
            if SHELLS.contains(&name) {
                cmd.shell = true;
            }
            if v.is_empty() && !raw.quoted {
                continue;
            }
            if v.chars().eq(whole.iter().copied()) {
                // The whole text read back as itself: nothing more in it.
                self.push(Word::Text(v));
                continue;
            }
            self.value(v, depth, shell && given_to_shell);
        }
        Ok(())
    }

    /// Pushes a word's value and reads the words it holds.
    fn value(&mut self, v: String, depth: usize, shell: bool) {
        if v.chars().any(special) {
            self.push(Word::Text(v.clone()));
            self.text(&v, depth + 1, shell);
        } else {
            self.push(Word::Text(v));
        }
    }

    /// A substitution's body: shell text, read where it stands.
    fn body(&mut self, body: &[char], depth: usize) -> Result<(), Undecodable> {
        if depth >= MAX_DEPTH {
            return Err(Undecodable);
        }
        self.script(body, depth + 1, true)
    }

    /// `"…"` from `i` (after the opening quote); returns the index after the
    /// closing quote.
    fn double_quoted(
        &mut self,
        s: &[char],
        mut i: usize,
        depth: usize,
        raw: &mut Raw,
    ) -> Result<usize, Undecodable> {
        loop {
            match s.get(i) {
                None => return Err(Undecodable),
                Some('"') => return Ok(i + 1),
                Some('\\') => {
                    match s.get(i + 1) {
                        Some('\n') => {}
                        Some(&n) if matches!(n, '$' | '`' | '"' | '\\') => {
                            raw.chars.push((n, true))
                        }
                        Some(&n) => {
                            raw.chars.push(('\\', true));
                            raw.chars.push((n, true));
                        }
                        None => return Err(Undecodable),
                    }
                    i += 2;
                }
                Some('$') => {
                    let before = raw.chars.len();
                    i = self.dollar(s, i, depth, raw)?;
                    for c in raw.chars.iter_mut().skip(before) {
                        c.1 = true;
                    }
                }
                Some('`') => i = self.backtick(s, i, depth, raw, true)?,
                Some(&c) => {
                    raw.chars.push((c, true));
                    i += 1;
                }
            }
        }
    }

    /// `$…` at `i`: an expansion, or a literal `$`.
    fn dollar(
        &mut self,
        s: &[char],
        i: usize,
        depth: usize,
        raw: &mut Raw,
    ) -> Result<usize, Undecodable> {
        match s.get(i + 1) {
            Some('(') => {
                let end = matching(s, i + 1, '(', ')').ok_or(Undecodable)?;
                // `$((…))` is arithmetic; its body may still hold `$(…)`.
                self.body(s.get(i + 2..end).unwrap_or_default(), depth)?;
                raw.expansion = true;
                Ok(end + 1)
            }
            Some('{') => {
                let end = matching(s, i + 1, '{', '}').ok_or(Undecodable)?;
                // A parameter's operators and default: no command in it,
                // but a substitution inside still runs.
                if depth >= MAX_DEPTH {
                    return Err(Undecodable);
                }
                self.script(s.get(i + 2..end).unwrap_or_default(), depth + 1, false)?;
                raw.expansion = true;
                Ok(end + 1)
            }
            Some(&c) if c.is_ascii_alphabetic() || c == '_' => {
                let mut j = i + 1;
                while s
                    .get(j)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    j += 1;
                }
                raw.expansion = true;
                Ok(j)
            }
            Some(&c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                raw.expansion = true;
                Ok(i + 2)
            }
            _ => {
                raw.chars.push(('$', false));
                Ok(i + 1)
            }
        }
    }

    /// `` `…` `` at `i`: its body, with `\\`, `` \` `` and `\$` (and `\"`
    /// inside double quotes) unescaped, read as shell text.
    fn backtick(
        &mut self,
        s: &[char],
        mut i: usize,
        depth: usize,
        raw: &mut Raw,
        in_double: bool,
    ) -> Result<usize, Undecodable> {
        i += 1;
        let mut body = Vec::new();
        loop {
            match s.get(i) {
                None => return Err(Undecodable),
                Some('`') => break,
                Some('\\') => {
                    match s.get(i + 1) {
                        Some(&n) if matches!(n, '\\' | '`' | '$') || in_double && n == '"' => {
                            body.push(n)
                        }
                        Some(&n) => {
                            body.push('\\');
                            body.push(n);
                        }
                        None => return Err(Undecodable),
                    }
                    i += 2;
                }
                Some(&c) => {
                    body.push(c);
                    i += 1;
                }
            }
        }
        self.body(&body, depth)?;
        raw.expansion = true;
        Ok(i + 1)
    }
}

/// Characters that may make a word's value read as more than itself: a
/// value without any needs no second reading.
fn special(c: char) -> bool {
    c.is_whitespace() || "'\"\\$`;&|()<>{#".contains(c)
}

/// `NAME=…`, `NAME+=…` or `NAME[…]=…` with the name unquoted.
fn is_assignment(chars: &[Ch]) -> bool {
    let mut it = chars.iter().peekable();
    match it.next() {
        Some((c, false)) if c.is_ascii_alphabetic() || *c == '_' => {}
        _ => return false,
    }
    while let Some((c, quoted)) = it.next() {
        if *quoted {
            return false;
        }
        match c {
            c if c.is_ascii_alphanumeric() || *c == '_' => {}
            '=' => return true,
            '+' => return matches!(it.peek(), Some(('=', false))),
            '[' => return chars.iter().any(|&(c, q)| c == '=' && !q),
            _ => return false,
        }
    }
    false
}

/// The index of the `close` that ends the group opened at `open_at`,
/// skipping quotes, escapes and nested groups.
fn matching(s: &[char], open_at: usize, open: char, close: char) -> Option<usize> {
    matching_within(s, open_at, open, close, 0)
}

/// [`matching`], `nested` groups deep inside double quotes (bounded: no
/// script exhausts the stack).
fn matching_within(
    s: &[char],
    open_at: usize,
    open: char,
    close: char,
    nested: usize,
) -> Option<usize> {
    if nested > MAX_DEPTH * 4 {
        return None;
    }
    let mut depth = 0usize;
    let mut i = open_at;
    while let Some(&c) = s.get(i) {
        match c {
            '\\' => i += 1,
            '$' if s.get(i + 1) == Some(&'\'') => {
                // `$'…'`: a backslash escapes a quote here.
                i += 2;
                while s.get(i).is_some_and(|&q| q != '\'') {
                    if s.get(i) == Some(&'\\') {
                        i += 1;
                    }
                    i += 1;
                }
                s.get(i)?;
            }
            '\'' => {
                i += 1;
                while s.get(i).is_some_and(|&q| q != '\'') {
                    i += 1;
                }
                s.get(i)?;
            }
            '"' => {
                i += 1;
                loop {
                    match s.get(i)? {
                        '\\' => i += 1,
                        '"' => break,
                        '$' if s.get(i + 1) == Some(&'(') => {
                            i = matching_within(s, i + 1, '(', ')', nested + 1)?
                        }
                        '`' => {
                            i += 1;
                            while s.get(i).is_some_and(|&q| q != '`') {
                                i += 1;
                            }
                            s.get(i)?;
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            '`' => {
                i += 1;
                while s.get(i).is_some_and(|&q| q != '`') {
                    if s.get(i) == Some(&'\\') {
                        i += 1;
                    }
                    i += 1;
                }
                s.get(i)?;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests;
