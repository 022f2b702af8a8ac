//! The header's Python dict literal, parsed (`{'descr': '<u2', 'fortran_order': False,
//! 'shape': (2, 3, 4), }`).

/// The three values of a header dict.
pub(super) struct Dict {
    pub(super) descr: String,
    pub(super) fortran_order: bool,
    pub(super) shape: Vec<usize>,
}

/// A value of the header dict's tiny Python-literal grammar.
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
    /// A `[...]` list: only a structured `descr` is one; the key decides the message.
    List,
}

/// Parses `{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }`.
pub(super) fn parse_dict(text: &str) -> std::result::Result<Dict, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        let value = p.value()?;
        let dup = match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr.replace(s).is_some(),
            ("fortran_order", Value::Bool(b)) => fortran.replace(b).is_some(),
            ("shape", Value::Tuple(t)) => shape.replace(t).is_some(),
            ("descr", Value::List) => {
                return Err("'descr' lists (structured dtypes) are not supported".into());
            }
            ("descr", _) => {
                return Err(
                    "'descr' must be a string (structured dtypes are not supported)".into(),
                );
            }
            ("fortran_order", _) => return Err("'fortran_order' must be True or False".into()),
            ("shape", Value::List) => {
                return Err("'shape' must be a tuple of integers, not a list".into());
            }
            ("shape", _) => return Err("'shape' must be a tuple of integers".into()),
            (other, _) => return Err(format!("unexpected key '{other}' in the header dict")),
        };
        if dup {
            return Err(format!("key '{key}' appears twice"));
        }
        p.ws();
        if p.eat(b',') {
            continue;
        }
        p.expect(b'}')?;
        break;
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected text after the dict at byte {}", p.i));
    }
    let missing = |k| format!("the header dict has no '{k}' key");
    Ok(Dict {
        descr: descr.ok_or_else(|| missing("descr"))?,
        fortran_order: fortran.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
    })
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{}'", c as char)))
        }
    }

    fn unexpected(&self, what: &str) -> String {
        match self.s.get(self.i) {
            Some(&c) => format!("expected {what} at byte {}, found '{}'", self.i, c as char),
            None => format!("expected {what} at byte {}, found the end", self.i),
        }
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(self.unexpected("a quoted string")),
        };
        let start = self.i + 1;
        let end = self.s[start..]
            .iter()
            .position(|&c| c == q || c == b'\\')
            .map(|k| start + k)
            .ok_or_else(|| format!("unterminated string at byte {}", self.i))?;
        if self.s[end] == b'\\' {
            return Err(format!("escape sequences are not supported (byte {end})"));
        }
        self.i = end + 1;
        Ok(String::from_utf8_lossy(&self.s[start..end]).into_owned())
    }

    fn value(&mut self) -> std::result::Result<Value, String> {
        self.ws();
        let rest = &self.s[self.i..];
        if rest.starts_with(b"True") {
            self.i += 4;
            Ok(Value::Bool(true))
        } else if rest.starts_with(b"False") {
            self.i += 5;
            Ok(Value::Bool(false))
        } else if rest.starts_with(b"(") {
            self.i += 1;
            let mut dims = Vec::new();
            loop {
                if self.eat(b')') {
                    break;
                }
                dims.push(self.int()?);
                if self.eat(b',') {
                    continue;
                }
                self.expect(b')')?;
                break;
            }
            Ok(Value::Tuple(dims))
        } else if rest.starts_with(b"'") || rest.starts_with(b"\"") {
            Ok(Value::Str(self.string()?))
        } else if rest.starts_with(b"[") {
            self.skip_list()?;
            Ok(Value::List)
        } else {
            Err(self.unexpected("a string, True, False or a tuple"))
        }
    }

    /// Skips a bracketed list (nested brackets included; strings are not interpreted).
    fn skip_list(&mut self) -> std::result::Result<(), String> {
        let start = self.i;
        let mut depth = 0usize;
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err(format!("unterminated list at byte {start}"))
    }

    fn int(&mut self) -> std::result::Result<usize, String> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.unexpected("a non-negative integer"));
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        let v = digits
            .parse::<usize>()
            .map_err(|_| format!("dimension {digits} is too large"))?;
        // Python 2 wrote long integers as `3L`.
        if self.s.get(self.i) == Some(&b'L') {
            self.i += 1;
        }
        Ok(v)
    }
}
