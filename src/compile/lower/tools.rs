//! `permissions` and `apps`: exact-match tables.

use super::super::*;

impl Compiler<'_> {
    pub(in crate::compile) fn permissions(&mut self, perms: &mut Perms, stmts: &[PermStmt]) {
        for s in stmts {
            match s {
                PermStmt::Default(v) => {
                    perms.default_deny = v.node == Effect::Deny;
                    perms.default_rule = Some(self.rule(v.span));
                }
                PermStmt::Rule {
                    effect,
                    permissions,
                    span,
                } => {
                    let id = self.rule(*span);
                    for p in permissions {
                        if let Some(slot) = perms.rules.get_mut(p.node.index()) {
                            let target = if *effect == Effect::Deny {
                                &mut slot.0
                            } else {
                                &mut slot.1
                            };
                            target.get_or_insert(id);
                        }
                    }
                }
            }
        }
    }

    pub(in crate::compile) fn apps(&mut self, apps: &mut Apps, stmts: &[AppsStmt]) {
        for s in stmts {
            let id = self.rule(s.span);
            for n in &s.names {
                let key = app_key(&n.node);
                apps.max_len = apps.max_len.max(key.len());
                apps.denied.entry(key).or_insert(id);
            }
        }
    }
}
