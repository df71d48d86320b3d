use napi_derive::napi;

#[napi]
pub fn hello() -> f64 {
    1.0
}
