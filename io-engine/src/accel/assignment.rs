//! `OPCODE=MODULE`: an opcode's assignment as `--accel-assign` gives it.
//!
//! Thread: any; parsed at start, off the data path.

use std::str::FromStr;

use super::{AccelError, Opcode};

/// `OPCODE=MODULE`, as given to `--accel-assign`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The opcode.
    pub op: Opcode,
    /// The module to run it.
    pub module: String,
}

impl FromStr for Assignment {
    type Err = AccelError;
    fn from_str(s: &str) -> Result<Self, AccelError> {
        let (op, module) = s
            .split_once('=')
            .ok_or_else(|| AccelError::BadAssignment(s.to_string()))?;
        let op = op
            .trim()
            .parse()
            .map_err(|_| AccelError::BadAssignment(s.to_string()))?;
        let module = module.trim();
        if module.is_empty() {
            return Err(AccelError::BadAssignment(s.to_string()));
        }
        Ok(Assignment {
            op,
            module: module.to_string(),
        })
    }
}
