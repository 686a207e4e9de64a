//! A small argument reader: flags, flags with values, positional paths.

use crate::Exit;

pub struct Args {
    pub flags: Vec<String>,
    pub values: Vec<(String, String)>,
    pub paths: Vec<String>,
}

impl Args {
    /// Reads `args`; `switches` take no value, `options` take one.
    pub fn parse(args: &[String], switches: &[&str], options: &[&str]) -> Result<Args, Exit> {
        let mut a = Args {
            flags: Vec::new(),
            values: Vec::new(),
            paths: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if let Some((k, v)) = arg.split_once('=').filter(|(k, _)| options.contains(k)) {
                a.values.push((k.to_string(), v.to_string()));
            } else if switches.contains(&arg.as_str()) {
                a.flags.push(arg.clone());
            } else if options.contains(&arg.as_str()) {
                match it.next() {
                    Some(v) => a.values.push((arg.clone(), v.clone())),
                    None => return Err(Exit::Usage(format!("`{arg}` needs a value"))),
                }
            } else if arg.starts_with('-') && arg != "-" {
                let all = switches.iter().chain(options).copied();
                let hint = gatehouse::diag::did_you_mean(arg, all)
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                return Err(Exit::Usage(format!("unknown option `{arg}`{hint}")));
            } else {
                a.paths.push(arg.clone());
            }
        }
        Ok(a)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.values
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn need_paths(&self) -> Result<(), Exit> {
        if self.paths.is_empty() {
            Err(Exit::Usage("no policy file or directory given".into()))
        } else {
            Ok(())
        }
    }
}
