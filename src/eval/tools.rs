//! Tool permissions (docs/language.md#permissions) and app policy (docs/language.md#apps).

use crate::compile::Policy;
use crate::decision::{Decision, Reason};
use crate::syntax::ast::Permission;

const FORBIDDEN: u16 = 403;

fn forbidden(mut d: Decision) -> Decision {
    d.status = Some(FORBIDDEN);
    d
}

impl Policy {
    /// May the agent use this tool permission (`shell.exec`, ...)? A deny
    /// carries status 403.
    pub fn tool(&self, permission: &str) -> Decision {
        let Some(i) = Permission::parse(permission).map(Permission::index) else {
            return forbidden(Decision::deny(Reason::UnknownPermission, None));
        };
        let (deny, allow) = self.perms.rules.get(i).copied().unwrap_or((None, None));
        if let Some(r) = deny {
            return forbidden(Decision::deny(Reason::DeniedByRule, Some(r)));
        }
        if let Some(r) = allow {
            return Decision::allow(Reason::AllowedByRule, Some(r));
        }
        if self.perms.default_deny {
            forbidden(Decision::deny(Reason::DefaultDeny, self.perms.default_rule))
        } else {
            Decision::allow(Reason::DefaultAllow, self.perms.default_rule)
        }
    }

    /// May this program run? It is denied when any component of its path,
    /// compared case-insensitively without one trailing `.app` or `.exe`,
    /// is a denied name. An empty name or one with NUL is denied
    /// (`invalid_path`).
    pub fn app(&self, program: &str) -> Decision {
        if program.trim().is_empty() || program.contains('\0') {
            return Decision::deny(Reason::InvalidPath, None);
        }
        let mut first = None;
        for component in program.split(['/', '\\']) {
            if let Some(r) = self.app_component(component) {
                first = Some(first.map_or(r, |f: crate::decision::RuleId| f.min(r)));
            }
        }
        match first {
            Some(r) => Decision::deny(Reason::DeniedByRule, Some(r)),
            None => Decision::allow(Reason::DefaultAllow, None),
        }
    }

    fn app_component(&self, component: &str) -> Option<crate::decision::RuleId> {
        if component.is_empty()
            || component.len() > self.apps.max_len + 4
            || self.apps.denied.is_empty()
        {
            return None;
        }
        let mut buf = [0u8; 260];
        if !component.is_ascii() || component.len() > buf.len() {
            // Rare: Unicode case folding, or a name longer than the buffer.
            return self
                .apps
                .denied
                .get(&crate::compile::app_key(component))
                .copied();
        }
        let dst = buf.get_mut(..component.len())?;
        for (d, s) in dst.iter_mut().zip(component.bytes()) {
            *d = s.to_ascii_lowercase();
        }
        let lower = std::str::from_utf8(buf.get(..component.len())?).ok()?;
        let key = lower
            .strip_suffix(".app")
            .or_else(|| lower.strip_suffix(".exe"))
            .unwrap_or(lower);
        self.apps.denied.get(key).copied()
    }
}
