//! otg.proto's messages as the HTTP API's JSON: each request's bytes read with its message
//! descriptor into proto3 JSON with the proto's field names, each reply written back the
//! same way, and the unary methods' handlers, shared by the unary and the streaming calls.

use gapless_otg::runs::requests;
use gapless_otg::OtgError;
use prost::bytes::Bytes;
use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions};
use serde_json::{json, Value};
use tonic::{Code, Status};

use crate::model::POOL;
use crate::otg::{capture_file, config_now, control_with, metrics::metrics_for, set_config_to, update_config_to};
use crate::Shared;

/// The service's full name in `otg.proto`.
pub const SERVICE: &str = "otg.Openapi";

/// The request and reply types of `method`, or UNIMPLEMENTED for one not in the service.
pub(super) fn types(method: &str) -> Result<(MessageDescriptor, MessageDescriptor), Status> {
    let svc = POOL.get_service_by_name(SERVICE).expect("otg.fds has otg.Openapi");
    let m = svc
        .methods()
        .find(|m| m.name() == method)
        .ok_or_else(|| Status::unimplemented(format!("{method} is not a method of {SERVICE}")))?;
    Ok((m.input(), m.output()))
}

/// A method's handler, in the JSON form of its request and reply messages.
pub(super) async fn handle(s: &Shared, method: &str, req: Value) -> Result<Value, OtgError> {
    let field = |k: &str| req.get(k).cloned().unwrap_or_else(|| json!({}));
    Ok(match method {
        "GetVersion" => json!({ "version": requests::version() }),
        "GetConfig" => json!({ "config": config_now(s) }),
        "SetConfig" => json!({ "warning": set_config_to(s.clone(), field("config")).await? }),
        "UpdateConfig" => json!({ "warning": update_config_to(s.clone(), field("config_update")).await? }),
        "SetControlState" => json!({ "warning": control_with(s.clone(), field("control_state")).await? }),
        "GetMetrics" => {
            let (s, req) = (s.clone(), field("metrics_request"));
            json!({ "metrics_response": crate::otg::blocking(move || metrics_for(&s, &req)).await? })
        }
        "GetStates" => json!({ "states_response": crate::otg::states(s.clone(), field("states_request")).await? }),
        "GetCapture" => {
            use base64::Engine;
            let (bytes, _) = capture_file(s, &field("capture_request")).await?;
            json!({ "response_bytes": base64::engine::general_purpose::STANDARD.encode(bytes) })
        }
        other => {
            return Err(OtgError::not_found(format!(
                "{SERVICE}/{other} is not part of the OTG subset gapless serves (its HTTP twin is refused the same way)"
            )))
        }
    })
}

/// A message's bytes as proto3 JSON with the proto's field names (the HTTP API's JSON).
pub(super) fn to_json(desc: &MessageDescriptor, bytes: Bytes) -> Result<Value, Status> {
    let msg = DynamicMessage::decode(desc.clone(), bytes).map_err(|e| {
        refuse(OtgError::invalid(format!(
            "{}: not a valid message: {e}",
            desc.full_name()
        )))
    })?;
    let opts = SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(false);
    msg.serialize_with_options(serde_json::value::Serializer, &opts)
        .map_err(|e| refuse(OtgError::internal(format!("{}: {e}", desc.full_name()))))
}

/// A reply's JSON as the message's bytes; fields the message lacks are left out.
pub(super) fn from_json(desc: &MessageDescriptor, v: Value) -> Result<Bytes, Status> {
    let opts = DeserializeOptions::new().deny_unknown_fields(false);
    let msg = DynamicMessage::deserialize_with_options(desc.clone(), v, &opts).map_err(|e| {
        refuse(OtgError::internal(format!(
            "the reply does not fit {}: {e}",
            desc.full_name()
        )))
    })?;
    Ok(msg.encode_to_vec().into())
}

/// An OTG error as a gRPC status whose message is the error's JSON.
pub(super) fn refuse(e: OtgError) -> Status {
    let code = match e.code {
        400 => Code::InvalidArgument,
        404 => Code::Unimplemented,
        409 => Code::FailedPrecondition,
        _ => Code::Internal,
    };
    Status::new(code, e.body().to_string())
}
