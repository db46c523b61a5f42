//! The messages of gnmi.proto (openconfig/gnmi, gNMI 0.10.0) that this server reads and
//! writes, written out with prost's derive and the proto's field numbers: no code is
//! generated and no `protoc` is needed. Fields it never uses (extensions, the deprecated
//! `Value`, `element`, `Error` and `Any`) are left out; prost skips them when a client sends
//! them.

use std::collections::BTreeMap;

/// gnmi.proto's `gnmi_service` option: the gNMI version the messages are from.
pub const GNMI_VERSION: &str = "0.10.0";

/// `Encoding`.
pub mod encoding {
    pub const JSON: i32 = 0;
    pub const BYTES: i32 = 1;
    pub const PROTO: i32 = 2;
    pub const ASCII: i32 = 3;
    pub const JSON_IETF: i32 = 4;
}

/// `SubscriptionList.Mode`.
pub mod list_mode {
    pub const STREAM: i32 = 0;
    pub const ONCE: i32 = 1;
    pub const POLL: i32 = 2;
}

/// `SubscriptionMode`.
pub mod sub_mode {
    pub const TARGET_DEFINED: i32 = 0;
    pub const ON_CHANGE: i32 = 1;
    pub const SAMPLE: i32 = 2;
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PathElem {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(btree_map = "string, string", tag = "2")]
    pub key: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Path {
    #[prost(string, tag = "2")]
    pub origin: String,
    #[prost(message, repeated, tag = "3")]
    pub elem: Vec<PathElem>,
    #[prost(string, tag = "4")]
    pub target: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ScalarArray {
    #[prost(message, repeated, tag = "1")]
    pub element: Vec<TypedValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TypedValue {
    #[prost(oneof = "Value", tags = "1, 2, 3, 4, 5, 8, 10, 11, 14")]
    pub value: Option<Value>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    #[prost(string, tag = "1")]
    StringVal(String),
    #[prost(int64, tag = "2")]
    IntVal(i64),
    #[prost(uint64, tag = "3")]
    UintVal(u64),
    #[prost(bool, tag = "4")]
    BoolVal(bool),
    #[prost(bytes, tag = "5")]
    BytesVal(Vec<u8>),
    #[prost(message, tag = "8")]
    LeaflistVal(ScalarArray),
    #[prost(bytes, tag = "10")]
    JsonVal(Vec<u8>),
    #[prost(bytes, tag = "11")]
    JsonIetfVal(Vec<u8>),
    #[prost(double, tag = "14")]
    DoubleVal(f64),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Update {
    #[prost(message, optional, tag = "1")]
    pub path: Option<Path>,
    #[prost(message, optional, tag = "3")]
    pub val: Option<TypedValue>,
    #[prost(uint32, tag = "4")]
    pub duplicates: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Notification {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub prefix: Option<Path>,
    #[prost(message, repeated, tag = "4")]
    pub update: Vec<Update>,
    #[prost(message, repeated, tag = "5")]
    pub delete: Vec<Path>,
    #[prost(bool, tag = "6")]
    pub atomic: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelData {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub organization: String,
    #[prost(string, tag = "3")]
    pub version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CapabilityResponse {
    #[prost(message, repeated, tag = "1")]
    pub supported_models: Vec<ModelData>,
    #[prost(int32, repeated, tag = "2")]
    pub supported_encodings: Vec<i32>,
    #[prost(string, tag = "3")]
    pub g_nmi_version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetRequest {
    #[prost(message, optional, tag = "1")]
    pub prefix: Option<Path>,
    #[prost(message, repeated, tag = "2")]
    pub path: Vec<Path>,
    /// `DataType`: ALL 0, CONFIG 1, STATE 2, OPERATIONAL 3.
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    #[prost(int32, tag = "5")]
    pub encoding: i32,
    #[prost(message, repeated, tag = "6")]
    pub use_models: Vec<ModelData>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetResponse {
    #[prost(message, repeated, tag = "1")]
    pub notification: Vec<Notification>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Subscription {
    #[prost(message, optional, tag = "1")]
    pub path: Option<Path>,
    #[prost(int32, tag = "2")]
    pub mode: i32,
    #[prost(uint64, tag = "3")]
    pub sample_interval: u64,
    #[prost(bool, tag = "4")]
    pub suppress_redundant: bool,
    #[prost(uint64, tag = "5")]
    pub heartbeat_interval: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SubscriptionList {
    #[prost(message, optional, tag = "1")]
    pub prefix: Option<Path>,
    #[prost(message, repeated, tag = "2")]
    pub subscription: Vec<Subscription>,
    #[prost(int32, tag = "5")]
    pub mode: i32,
    #[prost(bool, tag = "6")]
    pub allow_aggregation: bool,
    #[prost(message, repeated, tag = "7")]
    pub use_models: Vec<ModelData>,
    #[prost(int32, tag = "8")]
    pub encoding: i32,
    #[prost(bool, tag = "9")]
    pub updates_only: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Poll {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SubscribeRequest {
    #[prost(oneof = "Request", tags = "1, 3")]
    pub request: Option<Request>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Request {
    #[prost(message, tag = "1")]
    Subscribe(SubscriptionList),
    #[prost(message, tag = "3")]
    Poll(Poll),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SubscribeResponse {
    #[prost(oneof = "Response", tags = "1, 3")]
    pub response: Option<Response>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Response {
    #[prost(message, tag = "1")]
    Update(Notification),
    #[prost(bool, tag = "3")]
    SyncResponse(bool),
}
