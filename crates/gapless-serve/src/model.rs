//! The OTG model, read from `otg.proto`'s descriptor: the one gate every OTG request body
//! passes, HTTP's as gRPC's ([`through_model`]), and the message types gRPC speaks. Imports
//! nothing of the server's; `grpc` and `otg` import it.

use std::sync::LazyLock;

use gapless_otg::OtgError;
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, SerializeOptions};
use serde_json::Value;

/// `otg.proto` and what it imports, from the pinned snappi wheel.
pub(crate) static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(include_bytes!("../proto/otg.fds").as_slice()).expect("the committed otg.fds decodes")
});

/// The one gate of every OTG request body, HTTP's as gRPC's: `v` read through `otg.proto`'s
/// message `name` (an unknown key, a wrong type, an enum value or an integer width outside
/// the model is refused with its path), then written as the proto3 JSON gRPC's requests
/// become (`grpc`'s `to_json`), so both transports hand on the same JSON.
pub(crate) fn through_model(name: &str, v: Value) -> Result<Value, OtgError> {
    let desc = POOL
        .get_message_by_name(&format!("otg.{name}"))
        .ok_or_else(|| OtgError::internal(format!("otg.{name} is not in otg.fds")))?;
    let opts = DeserializeOptions::new().deny_unknown_fields(true);
    let mut track = serde_path_to_error::Track::new();
    let msg =
        DynamicMessage::deserialize_with_options(desc, serde_path_to_error::Deserializer::new(v, &mut track), &opts)
            .map_err(|e| {
                let path = track.path().to_string();
                let at = if path == "." {
                    String::new()
                } else {
                    format!("{path}: ")
                };
                OtgError::invalid(format!(
                    "{at}{e}. Fix: give what the OTG model {} ({name}) takes there",
                    gapless_otg::API_SPEC_VERSION
                ))
            })?;
    let opts = SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(false);
    msg.serialize_with_options(serde_json::value::Serializer, &opts)
        .map_err(|e| OtgError::internal(format!("otg.{name}: {e}")))
}
