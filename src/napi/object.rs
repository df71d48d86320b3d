//! `objects!`: `#[napi(object)]` structs, each field written once with its value from the source
//! (`From`; `()` for constants). Docs as `#[doc = "..."]` (napi-rs keeps a `///`'s raw quote); a
//! field's type as an ident and its parameter (an `Option` written so, or `None` becomes `null`).

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
