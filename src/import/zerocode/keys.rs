//! The keys of a ZeroCode config, in three kinds: those that decide
//! something (mapped), those the real system knows that decide nothing
//! (skipped, listed once by name), and the rest (unknown: a warning with a
//! did-you-mean drawn from the first two). The lists follow the system's
//! public configuration reference.

/// Top-level keys that bear on decisions.
pub(super) const DECISIONS: &[&str] = &[
    "approval_policy",
    "sandbox_mode",
    "approvals_reviewer",
    "web_search",
    "allow_login_shell",
    "sandbox_workspace_write",
    "features",
    "experimental_network",
    "mcp_servers",
    "default_permissions",
    "permissions",
    "profile",
    "profiles",
    "tools",
];

/// Top-level keys the real system knows that decide nothing here.
pub(super) const IRRELEVANT: &[&str] = &[
    "agents",
    "analytics",
    "approval_handler",
    "apps",
    "auto_review",
    "base_instructions",
    "chatgpt_base_url",
    "check_for_update_on_startup",
    "cli_auth_credentials_store",
    "commit_attribution",
    "compact_prompt",
    "desktop",
    "developer_instructions",
    "disable_paste_burst",
    "disable_response_storage",
    "experimental_compact_prompt_file",
    "experimental_instructions_file",
    "experimental_use_freeform_apply_patch",
    "experimental_use_rmcp_client",
    "feedback",
    "file_opener",
    "forced_chatgpt_workspace_id",
    "forced_login_method",
    "ghost_snapshot",
    "hide_agent_reasoning",
    "history",
    "hooks",
    "include_apply_patch_tool",
    "instructions",
    "log_dir",
    "marketplaces",
    "mcp_oauth_callback_port",
    "mcp_oauth_credentials_store",
    "model",
    "model_auto_compact_token_limit",
    "model_context_window",
    "model_max_output_tokens",
    "model_provider",
    "model_providers",
    "model_reasoning_effort",
    "model_reasoning_summary",
    "model_reasoning_summary_format",
    "model_supports_reasoning_summaries",
    "model_verbosity",
    "notice",
    "notify",
    "oss_provider",
    "otel",
    "personality",
    "plan_mode_reasoning_effort",
    "plugins",
    "preferred_auth_method",
    "project_doc_fallback_filenames",
    "project_doc_max_bytes",
    "project_root_markers",
    "projects",
    "review_model",
    "service_tier",
    "shell_environment_policy",
    "show_raw_agent_reasoning",
    "skills",
    "sqlite_home",
    "suppress_unstable_features_warning",
    "tool_output_token_limit",
    "tui",
    "windows",
    "windows_wsl_setup_acknowledged",
    "zsh_path",
];

/// Keys of `[sandbox_workspace_write]`.
pub(super) const WORKSPACE_WRITE: &[&str] = &[
    "network_access",
    "writable_roots",
    "exclude_slash_tmp",
    "exclude_tmpdir_env_var",
];

/// Keys of the network proxy's table (`[features.network_proxy]`,
/// `[experimental_network]`, a profile's `network`).
pub(super) const PROXY: &[&str] = &[
    "enabled",
    "mode",
    "domains",
    "allowed_domains",
    "denied_domains",
    "unix_sockets",
    "allow_unix_sockets",
    "allow_local_binding",
    "enable_socks5",
    "enable_socks5_udp",
    "allow_upstream_proxy",
    "dangerously_allow_non_loopback_proxy",
    "dangerously_allow_all_unix_sockets",
    "managed_allowed_domains_only",
    "proxy_url",
    "socks_url",
    "admin_url",
];

/// The proxy switches, each a boolean.
pub(super) const SWITCHES: &[&str] = &[
    "allow_local_binding",
    "enable_socks5",
    "enable_socks5_udp",
    "allow_upstream_proxy",
    "dangerously_allow_non_loopback_proxy",
    "dangerously_allow_all_unix_sockets",
];

/// Keys of one `[mcp_servers.NAME]`: the first five decide.
pub(super) const MCP_SERVER: &[&str] = &[
    "enabled",
    "enabled_tools",
    "disabled_tools",
    "default_tools_approval_mode",
    "tools",
    "command",
    "args",
    "env",
    "env_vars",
    "cwd",
    "url",
    "bearer_token",
    "bearer_token_env_var",
    "http_headers",
    "env_http_headers",
    "startup_timeout_sec",
    "startup_timeout_ms",
    "tool_timeout_sec",
    "required",
    "supports_parallel_tool_calls",
    "scopes",
    "oauth_resource",
    "transport",
];

/// Keys of one `[permissions.NAME]` profile.
pub(super) const PROFILE: &[&str] = &[
    "extends",
    "filesystem",
    "network",
    "workspace_roots",
    "description",
];

/// The approval modes of MCP tools.
pub(super) const MCP_MODES: &[&str] = &["auto", "prompt", "approve", "writes"];

/// `approval_policy` values; `on-failure` is deprecated but still read by
/// the real system, and decided here as `on-request`.
pub(super) const APPROVALS: &[&str] = &["untrusted", "on-request", "on-failure", "never"];

/// The granular approval categories.
pub(super) const GRANULAR: &[&str] = &[
    "sandbox_approval",
    "rules",
    "mcp_elicitations",
    "request_permissions",
    "skill_approval",
];

/// Every key the importer knows at the top level, for did-you-means.
pub(super) fn top_level() -> Vec<&'static str> {
    DECISIONS.iter().chain(IRRELEVANT).copied().collect()
}
