//! Policy tests: the `expect` lines of the `test` blocks of a build, each
//! with its query, its policy and where it was written, ready to run
//! (docs/language.md#tests-and-queries). `policyc test` runs them; so can
//! an editor, a binding or a CI job of its own.

use crate::build::Build;
use crate::compile::{Policy, PolicySet};
use crate::decision::Decision;
use crate::query::Query;
use crate::source::Span;
use crate::syntax::ast::{Item, TestStmt};

/// One `expect` line of a `test` block.
///
/// ```
/// use gatehouse::{SourceMap, build};
///
/// let mut sources = SourceMap::new();
/// sources.add(
///     "agent.policy",
///     "policy agent {\n  network {\n    allow domain github.com\n  }\n}\n\
///      test \"github only\" {\n  expect allow connect github.com:443\n  expect deny connect example.com:443\n}\n",
/// );
/// let b = build(sources);
/// let set = b.set.as_ref().expect("compiles");
/// let cases = b.tests();
/// assert_eq!(cases.len(), 2);
/// for case in &cases {
///     let policy = case.policy_in(set).expect("the set's only policy");
///     assert!(case.passes(&policy.decide(&case.query)), "{}:{}", case.file, case.line);
/// }
/// assert_eq!((cases[1].line, cases[1].expected.outcome.as_str()), (8, "deny"));
/// ```
#[derive(Clone, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct TestCase {
    /// The source's name, as given to the [`SourceMap`](crate::SourceMap).
    pub file: String,
    /// The line of the `expect`, from 1.
    pub line: usize,
    /// The column of the `expect`, from 1, in characters.
    pub column: usize,
    /// The `expect` statement's place in the sources.
    pub span: Span,
    /// The description of the `test` block it is in.
    pub test: String,
    /// The policy named by the last `policy NAME` before it in its block;
    /// `None` when there was none (the set's only policy decides).
    pub policy: Option<String>,
    /// The query to decide.
    pub query: Query,
    /// The query as it was written, for reports.
    pub query_text: String,
    /// What the decision must be.
    pub expected: Expected,
}

/// What a [`TestCase`] expects.
#[derive(Clone, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct Expected {
    /// The outcome's word: `allow`, `deny`, `ask`, ... (see
    /// [`Outcome::as_str`](crate::Outcome::as_str)).
    pub outcome: String,
    /// The reason code after `because`, when one was written.
    pub because: Option<String>,
}

impl TestCase {
    /// The policy that decides this case: the one it names, else the only
    /// one its file defines, else the set's only one. `None` when none
    /// exists, which `check` reports as an
    /// error (`unknown_policy`, `test_without_policy`) before any run.
    pub fn policy_in<'s>(&self, set: &'s PolicySet) -> Option<&'s Policy> {
        match &self.policy {
            Some(name) => set.policy(name),
            None => set.single(),
        }
    }

    /// Whether a decision is the expected one: the same outcome and, when
    /// a `because` was written, the same reason.
    pub fn passes(&self, d: &Decision) -> bool {
        d.outcome.as_str() == self.expected.outcome
            && self
                .expected
                .because
                .as_deref()
                .is_none_or(|b| b == d.reason.as_str())
    }
}

impl Build {
    /// Every `expect` of every `test` block, in source order.
    pub fn tests(&self) -> Vec<TestCase> {
        let mut out = Vec::new();
        for (file, (_, src)) in self.files.iter().zip(self.sources.files()) {
            for item in &file.items {
                let Item::Test(t) = item else { continue };
                // Without `policy NAME`: the set's only policy, else the
                // only policy this file defines (docs/language.md).
                let mut policy = file.only_policy().map(str::to_string);
                for s in &t.stmts {
                    match s {
                        TestStmt::Policy(n) => policy = Some(n.node.clone()),
                        TestStmt::Expect(e) => {
                            let at = src.line_col(e.span.start);
                            out.push(TestCase {
                                file: src.name.clone(),
                                line: at.line,
                                column: at.column,
                                span: e.span,
                                test: t.description.value.clone(),
                                policy: policy.clone(),
                                query: e.query.clone(),
                                query_text: e.query_text.clone(),
                                expected: Expected {
                                    outcome: e.decision.node.clone(),
                                    because: e.because.as_ref().map(|b| b.node.clone()),
                                },
                            });
                        }
                    }
                }
            }
        }
        out
    }
}
