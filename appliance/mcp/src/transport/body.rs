//! The HTTP port's response bodies, for every handler on it.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};

pub type Body = BoxBody<Bytes, Infallible>;

pub fn text_response(status: StatusCode, text: impl Into<String>) -> Response<Body> {
    let mut body = text.into();
    body.push('\n');
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
