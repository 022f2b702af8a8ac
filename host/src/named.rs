//! Enums of named choices (`--precision f64`, `--device gpu`, ...): one macro writes each
//! enum's `name` and its [`FromStr`](std::str::FromStr) from one table of variants and names,
//! so the two can never disagree and every refusal reads alike.

/// Implements `name` (the variant's name, a `const fn`) and `FromStr` (the name back to the
/// variant; anything else an [`Error::InvalidParameter`](crate::error::Error) for `$param`
/// listing the names in table order) for the enum `$ty`, from the table `Variant => "name"`.
macro_rules! named_choices {
    ($ty:ty, $param:expr, $($variant:ident => $name:literal),+ $(,)?) => {
        impl $ty {
            /// The name of this choice on the command line (and in summaries and messages).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                match s {
                    $($name => Ok(Self::$variant),)+
                    _ => Err($crate::error::Error::param(
                        $param,
                        format!("`{s}` is not one of {}", [$($name),+].join(", ")),
                    )),
                }
            }
        }
    };
}

pub(crate) use named_choices;

#[cfg(test)]
mod tests {
    /// A choice of two, named as the crate's enums are.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Side {
        Left,
        RightHand,
    }

    named_choices!(Side, "side", Left => "left", RightHand => "right-hand");

    /// Names go both ways; anything else is refused naming the parameter and every name.
    #[test]
    fn names_round_trip_and_others_are_refused() {
        for side in [Side::Left, Side::RightHand] {
            assert_eq!(side.name().parse::<Side>().expect("name"), side);
        }
        let e = "up".parse::<Side>().expect_err("up");
        assert!(
            e.to_string()
                .contains("`up` is not one of left, right-hand"),
            "{e}"
        );
        let e = "Left".parse::<Side>().expect_err("case");
        assert!(e.to_string().contains("side"), "{e}");
    }
}
