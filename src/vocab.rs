//! The vocabulary every stage shares: the keyword-valued enums of the
//! language (effects, switches, permissions, modes, risk levels and
//! categories, log fields), each with its spellings. The bottom of the
//! crate: it imports nothing from it.

use serde::{Deserialize, Serialize};

/// Declares a keyword-valued enum with its spellings.
macro_rules! keyword_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Ord, PartialOrd, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $(#[doc = concat!("`", $text, "`")] $variant),+ }
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The value's position in [`Self::ALL`] (its declaration
            /// order), for tables indexed by value.
            pub const fn index(self) -> usize {
                self as usize
            }
            /// The spelling used in policy text.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// Every spelling, for "did you mean" suggestions.
            pub fn spellings() -> Vec<&'static str> {
                Self::ALL.iter().map(|v| v.as_str()).collect()
            }
            /// Parses the spelling used in policy text.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

keyword_enum!(
    /// `allow` or `deny`.
    Effect { Allow = "allow", Deny = "deny" }
);
keyword_enum!(
    /// A switch value.
    Switch { On = "on", Off = "off" }
);
keyword_enum!(
    /// Tool permissions of the Zoo seed (docs/language.md#permissions).
    Permission {
        ShellExec = "shell.exec",
        ScreenRead = "screen.read",
        InputControl = "input.control",
        FilesRead = "files.read",
        FilesWrite = "files.write",
    }
);
keyword_enum!(
    /// `proxy { listen ... }`.
    ListenScope { Loopback = "loopback", Any = "any" }
);
keyword_enum!(
    /// Sandbox modes, least to most permissive.
    SandboxMode { ReadOnly = "read-only", WorkspaceWrite = "workspace-write", DangerFullAccess = "danger-full-access" }
);
keyword_enum!(
    /// Approval policies.
    ApprovalMode { Untrusted = "untrusted", OnRequest = "on-request", Never = "never", Granular = "granular" }
);
keyword_enum!(
    /// Prompt categories of `approvals granular`.
    PromptCategory {
        SandboxApproval = "sandbox_approval",
        Rules = "rules",
        McpElicitations = "mcp_elicitations",
        RequestPermissions = "request_permissions",
        SkillApproval = "skill_approval",
    }
);
keyword_enum!(
    /// Who answers approval prompts.
    Reviewer { User = "user", AutoReview = "auto_review" }
);
keyword_enum!(
    /// Web search modes.
    WebSearchMode { Cached = "cached", Disabled = "disabled", Live = "live", Indexed = "indexed" }
);
keyword_enum!(
    /// MCP tool approval modes.
    McpMode {
        Auto = "auto",
        Prompt = "prompt",
        Approve = "approve",
        ApproveDestructive = "approve_destructive",
        Writes = "writes",
        Off = "off",
    }
);
keyword_enum!(
    /// Effects of `commands` rules, least to most strict.
    CommandEffect { Allow = "allow", Prompt = "prompt", Forbid = "forbid" }
);
keyword_enum!(
    /// Risk levels of the guardian.
    RiskLevel { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
);
keyword_enum!(
    /// User authorization levels of the guardian.
    AuthLevel { Unknown = "unknown", Low = "low", Medium = "medium", High = "high" }
);
keyword_enum!(
    /// Risk categories of the guardian.
    RiskCategory {
        Exfiltration = "exfiltration",
        CredentialProbing = "credential_probing",
        SecurityWeakening = "security_weakening",
        Destructive = "destructive",
    }
);
keyword_enum!(
    /// Decision fields that a `log { mask ... }` statement may hide.
    LogField {
        ConnectHost = "connect.host",
        DnsName = "dns.name",
        ResolvedName = "resolved.name",
        ResolvedAddrs = "resolved.addrs",
        SocketPath = "socket.path",
        AppProgram = "app.program",
        WritePath = "write.path",
        ReadPath = "read.path",
        ExecArgv = "exec.argv",
        McpTool = "mcp.tool",
        ReviewAction = "review.action",
    }
);
