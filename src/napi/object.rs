//! `objects!`: `#[napi(object)]` structs whose every field is written once, with the value it gets
//! from the source value (`From`; a source `()` for constants). Docs as `#[doc = "..."]`: napi-rs
//! copies a `///` line met inside a macro with its raw-string quote. A field's type is an ident
//! and its parameter (`Option` must reach napi-rs as written, or `None` becomes `null`).

macro_rules! objects {
    ($($(#[doc = $doc:literal])* $name:ident from $source:ty as $from:tt {
        $($(#[doc = $field_doc:literal])* $field:ident: $ty:ident $(<$inner:ty>)? = $value:expr,)+
    })+) => {$(
        $(#[doc = $doc])*
        #[::napi_derive::napi(object)]
        pub struct $name {
            $($(#[doc = $field_doc])* pub $field: $ty $(<$inner>)?,)+
        }

        impl From<$source> for $name {
            fn from($from: $source) -> $name {
                $name { $($field: $value,)+ }
            }
        }
    )+};
}

pub(crate) use objects;
