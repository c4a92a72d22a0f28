//! The expression grammar: C's operators with C's precedence, plus gdb's `@` (`*p@8`: eight
//! elements from `*p`), `$registers`, `::` paths, Rust `as` casts and `sizeof`. A
//! parenthesized type name is a cast when the name is a type (`(struct node *)p`).

use super::lexer::{tokenize, Tok, Token};
use super::EvalError;

/// Longest expression accepted (a bound on parsing work, not on usefulness).
pub const MAX_EXPRESSION_BYTES: usize = 4096;
const MAX_NESTING: u32 = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    /// Byte offset where the expression starts.
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Int { value: u64, unsigned: bool, long: bool },
    Float(f64),
    Char(u32),
    Str(String),
    Bool(bool),
    Ident(String),
    Register(String),
    Member { base: Box<Expr>, field: String, arrow: bool },
    Index { base: Box<Expr>, index: Box<Expr> },
    Unary { op: UnOp, operand: Box<Expr> },
    Binary { op: BinOp, left: Box<Expr>, right: Box<Expr> },
    /// `base@count`: `count` consecutive objects starting at lvalue `base`.
    Repeat { base: Box<Expr>, count: Box<Expr> },
    Cast { ty: TypeName, operand: Box<Expr> },
    SizeofType(TypeName),
    SizeofExpr(Box<Expr>),
    Ternary { cond: Box<Expr>, then: Box<Expr>, otherwise: Box<Expr> },
    Assign { target: Box<Expr>, value: Box<Expr> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Plus,
    Not,
    BitNot,
    Deref,
    AddrOf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitOr,
    BitXor,
    And,
    Or,
}

/// `x == "text"` / `"text" != x`: the non-literal side and the literal, for string comparison.
pub fn string_comparison<'e>(op: BinOp, left: &'e Expr, right: &'e Expr) -> Option<(&'e Expr, &'e String)> {
    if !matches!(op, BinOp::Eq | BinOp::Ne) {
        return None;
    }
    match (&left.kind, &right.kind) {
        (_, ExprKind::Str(s)) => Some((left, s)),
        (ExprKind::Str(s), _) => Some((right, s)),
        _ => None,
    }
}

/// A type as written: `struct node`, `unsigned long`, `std::string`, with `*`s.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeName {
    /// Base name, normalized: `struct node`, `unsigned int`, `u32`.
    pub base: String,
    pub pointers: u32,
    pub pos: usize,
}

/// Words that can only start a type.
const TYPE_WORDS: [&str; 17] = [
    "struct", "union", "enum", "class", "const", "volatile", "unsigned", "signed", "int", "char", "short", "long", "float",
    "double", "void", "bool", "_Bool",
];

/// Parse `src`; `is_type` says whether a (qualified) name is a type of the program.
pub fn parse(src: &str, is_type: &dyn Fn(&str) -> bool) -> Result<Expr, EvalError> {
    if src.len() > MAX_EXPRESSION_BYTES {
        return Err(EvalError::new(format!(
            "the expression is {} bytes; at most {MAX_EXPRESSION_BYTES}. Split it into several expressions.",
            src.len()
        )));
    }
    if src.trim().is_empty() {
        return Err(EvalError::new("the expression is empty; e.g. 'q->len' or 'items[i].key'".into()));
    }
    let tokens = tokenize(src)?;
    let mut p = Parser { tokens, at: 0, is_type, depth: 0 };
    let e = p.assignment()?;
    match &p.peek().tok {
        Tok::End => Ok(e),
        _ => Err(p.unexpected("an operator or the end of the expression")),
    }
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    is_type: &'a dyn Fn(&str) -> bool,
    depth: u32,
}

fn binary_op(t: &Tok) -> Option<(BinOp, u8)> {
    let Tok::Punct(p) = t else { return None };
    Some(match *p {
        "||" => (BinOp::Or, 1),
        "&&" => (BinOp::And, 2),
        "|" => (BinOp::BitOr, 3),
        "^" => (BinOp::BitXor, 4),
        "&" => (BinOp::BitAnd, 5),
        "==" => (BinOp::Eq, 6),
        "!=" => (BinOp::Ne, 6),
        "<" => (BinOp::Lt, 7),
        ">" => (BinOp::Gt, 7),
        "<=" => (BinOp::Le, 7),
        ">=" => (BinOp::Ge, 7),
        "<<" => (BinOp::Shl, 8),
        ">>" => (BinOp::Shr, 8),
        "+" => (BinOp::Add, 10),
        "-" => (BinOp::Sub, 10),
        "*" => (BinOp::Mul, 11),
        "/" => (BinOp::Div, 11),
        "%" => (BinOp::Rem, 11),
        _ => return None,
    })
}
/// gdb's `@` sits between shifts and `+`.
const REPEAT_PRECEDENCE: u8 = 9;

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.tokens[self.at]
    }
    fn peek_at(&self, n: usize) -> &Tok {
        &self.tokens[(self.at + n).min(self.tokens.len() - 1)].tok
    }
    fn next(&mut self) -> Token {
        let t = self.tokens[self.at].clone();
        if self.at + 1 < self.tokens.len() {
            self.at += 1;
        }
        t
    }
    fn is_punct(&self, p: &str) -> bool {
        matches!(&self.peek().tok, Tok::Punct(q) if *q == p)
    }
    fn expect(&mut self, p: &str) -> Result<(), EvalError> {
        if self.is_punct(p) {
            self.next();
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{p}'")))
        }
    }
    fn unexpected(&self, wanted: &str) -> EvalError {
        let t = self.peek();
        let found = match &t.tok {
            Tok::End => "the end of the expression".to_string(),
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Punct(p) => format!("'{p}'"),
            Tok::Register(r) => format!("'${r}'"),
            other => format!("{other:?}"),
        };
        EvalError::at(t.pos, &format!("expected {wanted}, found {found}"))
    }

    fn enter(&mut self) -> Result<(), EvalError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(EvalError::at(self.peek().pos, "the expression nests too deeply"));
        }
        Ok(())
    }

    fn assignment(&mut self) -> Result<Expr, EvalError> {
        self.enter()?;
        let target = self.ternary()?;
        let r = if self.is_punct("=") {
            self.next();
            let value = self.assignment()?;
            Ok(Expr { pos: target.pos, kind: ExprKind::Assign { target: Box::new(target), value: Box::new(value) } })
        } else {
            Ok(target)
        };
        self.depth -= 1;
        r
    }

    fn ternary(&mut self) -> Result<Expr, EvalError> {
        let cond = self.binary(1)?;
        if !self.is_punct("?") {
            return Ok(cond);
        }
        self.next();
        let then = self.assignment()?;
        self.expect(":")?;
        let otherwise = self.assignment()?;
        Ok(Expr {
            pos: cond.pos,
            kind: ExprKind::Ternary { cond: Box::new(cond), then: Box::new(then), otherwise: Box::new(otherwise) },
        })
    }

    /// Precedence climbing over the binary operators (all left-associative).
    fn binary(&mut self, min: u8) -> Result<Expr, EvalError> {
        let mut left = self.unary()?;
        loop {
            if self.is_punct("@") && REPEAT_PRECEDENCE >= min {
                self.next();
                let count = self.binary(REPEAT_PRECEDENCE + 1)?;
                left = Expr { pos: left.pos, kind: ExprKind::Repeat { base: Box::new(left), count: Box::new(count) } };
                continue;
            }
            let Some((op, prec)) = binary_op(&self.peek().tok) else { break };
            if prec < min {
                break;
            }
            self.next();
            let right = self.binary(prec + 1)?;
            left = Expr { pos: left.pos, kind: ExprKind::Binary { op, left: Box::new(left), right: Box::new(right) } };
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, EvalError> {
        self.enter()?;
        let pos = self.peek().pos;
        let op = match &self.peek().tok {
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::BitNot),
            Tok::Punct("*") => Some(UnOp::Deref),
            Tok::Punct("&") => Some(UnOp::AddrOf),
            _ => None,
        };
        let r = if let Some(op) = op {
            self.next();
            let operand = self.unary()?;
            Ok(Expr { pos, kind: ExprKind::Unary { op, operand: Box::new(operand) } })
        } else if matches!(&self.peek().tok, Tok::Ident(s) if s == "sizeof") {
            self.next();
            if self.is_punct("(") && self.type_follows(1) {
                self.next();
                let ty = self.type_name()?;
                self.expect(")")?;
                Ok(Expr { pos, kind: ExprKind::SizeofType(ty) })
            } else {
                let operand = self.unary()?;
                Ok(Expr { pos, kind: ExprKind::SizeofExpr(Box::new(operand)) })
            }
        } else if self.is_punct("(") && self.type_follows(1) {
            self.next();
            let ty = self.type_name()?;
            self.expect(")")?;
            let operand = self.unary()?;
            Ok(Expr { pos, kind: ExprKind::Cast { ty, operand: Box::new(operand) } })
        } else {
            self.postfix()
        };
        self.depth -= 1;
        r
    }

    /// Whether a type name starts `n` tokens ahead (for casts and `sizeof`).
    fn type_follows(&self, n: usize) -> bool {
        match self.peek_at(n) {
            Tok::Ident(s) if TYPE_WORDS.contains(&s.as_str()) => true,
            // `(name)` alone, or `(name *...)`, where name is a type: a cast.
            Tok::Ident(s) => {
                matches!(self.peek_at(n + 1), Tok::Punct(")") | Tok::Punct("*")) && (self.is_type)(s)
            }
            _ => false,
        }
    }

    fn type_name(&mut self) -> Result<TypeName, EvalError> {
        let pos = self.peek().pos;
        let mut words: Vec<String> = Vec::new();
        while let Tok::Ident(s) = &self.peek().tok {
            let s = s.clone();
            let keyword = TYPE_WORDS.contains(&s.as_str());
            // After a non-keyword name (a typedef, `struct X`'s X), the type is complete.
            let complete = words.last().is_some_and(|w| !TYPE_WORDS.contains(&w.as_str()));
            if complete && !keyword {
                break;
            }
            words.push(s);
            self.next();
        }
        words.retain(|w| w != "const" && w != "volatile");
        if words.is_empty() {
            return Err(self.unexpected("a type name"));
        }
        let mut pointers = 0;
        while self.is_punct("*") {
            self.next();
            pointers += 1;
            while matches!(&self.peek().tok, Tok::Ident(s) if s == "const" || s == "volatile") {
                self.next();
            }
        }
        Ok(TypeName { base: normalize_c_type(&words), pointers, pos })
    }

    fn postfix(&mut self) -> Result<Expr, EvalError> {
        let mut e = self.primary()?;
        loop {
            let pos = self.peek().pos;
            if self.is_punct(".") || self.is_punct("->") {
                let arrow = self.is_punct("->");
                self.next();
                let field_pos = self.peek().pos;
                let field = match self.next().tok {
                    Tok::Ident(s) => s,
                    // Rust tuple fields: `pair.0` (DWARF names them `__0`).
                    Tok::Int { value, .. } => format!("__{value}"),
                    Tok::Float(f) if !arrow => {
                        // `t.0.1` lexes as `t` `.` `0.1`: two tuple fields.
                        let text = format!("{f}");
                        let mut parts = text.split('.');
                        let a = parts.next().unwrap_or("0");
                        e = Expr { pos, kind: ExprKind::Member { base: Box::new(e), field: format!("__{a}"), arrow } };
                        format!("__{}", parts.next().unwrap_or("0"))
                    }
                    _ => return Err(EvalError::at(field_pos, "expected a field name after '.' or '->'")),
                };
                // Errors about a field point at the field's name.
                e = Expr { pos: field_pos, kind: ExprKind::Member { base: Box::new(e), field, arrow } };
            } else if self.is_punct("[") {
                self.next();
                let index = self.assignment()?;
                self.expect("]")?;
                e = Expr { pos, kind: ExprKind::Index { base: Box::new(e), index: Box::new(index) } };
            } else if self.is_punct("(") {
                return Err(EvalError::at(
                    pos,
                    "function calls are not evaluated (running code in a paused target can deadlock it); read the values they would compute instead",
                ));
            } else if matches!(&self.peek().tok, Tok::Ident(s) if s == "as") {
                self.next();
                let ty = self.type_name()?;
                e = Expr { pos: e.pos, kind: ExprKind::Cast { ty, operand: Box::new(e) } };
            } else if self.is_punct("++") || self.is_punct("--") || self.is_punct("+=") || self.is_punct("-=") {
                return Err(EvalError::at(pos, "increment and compound assignment are not supported; write 'x = x + 1'"));
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, EvalError> {
        let t = self.next();
        let kind = match t.tok {
            Tok::Int { value, unsigned, long } => ExprKind::Int { value, unsigned, long },
            Tok::Float(f) => ExprKind::Float(f),
            Tok::Char(c) => ExprKind::Char(c),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Register(r) => ExprKind::Register(r),
            Tok::Ident(s) if s == "true" => ExprKind::Bool(true),
            Tok::Ident(s) if s == "false" => ExprKind::Bool(false),
            Tok::Ident(s) if s == "nullptr" || s == "NULL" => ExprKind::Int { value: 0, unsigned: false, long: true },
            Tok::Ident(s) => ExprKind::Ident(s),
            Tok::Punct("(") => {
                let e = self.assignment()?;
                self.expect(")")?;
                return Ok(Expr { pos: t.pos, kind: e.kind });
            }
            _ => {
                if !matches!(t.tok, Tok::End) {
                    self.at -= 1;
                }
                return Err(self.unexpected("a value (a name, a number, '(' ...)"));
            }
        };
        Ok(Expr { kind, pos: t.pos })
    }
}

/// C's spellings of one type, folded to the names compilers write in DWARF
/// (`unsigned` → `unsigned int`, `long unsigned` → `long unsigned int`).
fn normalize_c_type(words: &[String]) -> String {
    let has = |w: &str| words.iter().any(|x| x == w);
    let tagged = words.first().is_some_and(|w| matches!(w.as_str(), "struct" | "union" | "enum" | "class"));
    let numeric = words.iter().all(|w| matches!(w.as_str(), "unsigned" | "signed" | "int" | "char" | "short" | "long"));
    if tagged || !numeric {
        return words.join(" ");
    }
    let longs = words.iter().filter(|w| *w == "long").count();
    let unsigned = has("unsigned");
    let base = if has("char") {
        return if unsigned { "unsigned char" } else if has("signed") { "signed char" } else { "char" }.into();
    } else if has("short") {
        "short"
    } else if longs >= 2 {
        "long long"
    } else if longs == 1 {
        "long"
    } else {
        return if unsigned { "unsigned int" } else { "int" }.into();
    };
    format!("{base} {}int", if unsigned { "unsigned " } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Expr {
        parse(s, &|n| n == "node" || n == "size_t").unwrap()
    }
    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Int { value, .. } => value.to_string(),
            ExprKind::Ident(s) => s.clone(),
            ExprKind::Register(r) => format!("${r}"),
            ExprKind::Member { base, field, arrow } => format!("{}{}{field}", show(base), if *arrow { "->" } else { "." }),
            ExprKind::Index { base, index } => format!("{}[{}]", show(base), show(index)),
            ExprKind::Unary { op, operand } => format!("({op:?} {})", show(operand)),
            ExprKind::Binary { op, left, right } => format!("({op:?} {} {})", show(left), show(right)),
            ExprKind::Repeat { base, count } => format!("({}@{})", show(base), show(count)),
            ExprKind::Cast { ty, operand } => format!("(cast {}{} {})", ty.base, "*".repeat(ty.pointers as usize), show(operand)),
            ExprKind::SizeofType(t) => format!("sizeof({})", t.base),
            ExprKind::Assign { target, value } => format!("(= {} {})", show(target), show(value)),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn precedence_follows_c() {
        assert_eq!(show(&p("a + b * c == d && !e")), "(And (Eq (Add a (Mul b c)) d) (Not e))");
        assert_eq!(show(&p("q->items[q->tail].key")), "q->items[q->tail].key");
        assert_eq!(show(&p("*p@8")), "((Deref p)@8)");
        assert_eq!(show(&p("*p@n+1")), "((Deref p)@(Add n 1))");
        assert_eq!(show(&p("-x->y")), "(Neg x->y)");
        assert_eq!(show(&p("&arr[2]")), "(AddrOf arr[2])");
        assert_eq!(show(&p("q->len = 0")), "(= q->len 0)");
    }

    #[test]
    fn casts_only_for_types() {
        assert_eq!(show(&p("(struct node *)p")), "(cast struct node* p)");
        assert_eq!(show(&p("(node*)p")), "(cast node* p)");
        assert_eq!(show(&p("(unsigned long)x")), "(cast long unsigned int x)");
        assert_eq!(show(&p("(size_t)x")), "(cast size_t x)");
        // Not a type: a parenthesized expression.
        assert_eq!(show(&p("(x)*y")), "(Mul x y)");
        assert_eq!(show(&p("sizeof(struct node)")), "sizeof(struct node)");
        assert_eq!(show(&p("x as u32")), "(cast u32 x)");
        assert_eq!(show(&p("pair.0")), "pair.__0");
    }

    #[test]
    fn errors_name_the_token_and_position() {
        let e = parse("a->", &|_| false).unwrap_err();
        assert_eq!(e.pos, Some(3));
        assert!(e.message.contains("field name"), "{}", e.message);
        let e = parse("f(1)", &|_| false).unwrap_err();
        assert!(e.message.contains("function calls"));
        let e = parse("(a + b", &|_| false).unwrap_err();
        assert!(e.message.contains("expected ')'"), "{}", e.message);
        assert!(parse(&"a+".repeat(5000), &|_| false).unwrap_err().message.contains("at most"));
        assert!(parse(&format!("{}1{}", "(".repeat(200), ")".repeat(200)), &|_| false).unwrap_err().message.contains("nests"));
        assert!(parse("   ", &|_| false).is_err());
    }
}
