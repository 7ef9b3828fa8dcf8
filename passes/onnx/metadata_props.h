// metadata_props of ONNX IR 10 messages read under ONNX 1.12's proto.
//
// torch's dynamo exporter records what mpc needs in metadata_props: the
// export signature on each graph input's ValueInfoProto, the traced aten
// call on each NodeProto. ONNX 1.12's proto has no such field in those
// messages, so protobuf keeps it among the unknown fields; with a newer
// proto it is a known field. One reader serves both.
#pragma once

#include <google/protobuf/message.h>

#include <string>
#include <string_view>

namespace mpc {

/// Field numbers of metadata_props in the messages ONNX 1.12 does not give
/// one (ONNX IR 10).
constexpr int kValueInfoMetadataField = 4;
constexpr int kNodeMetadataField = 9;

/// The value of `key` in message m's metadata_props (field `number`), read
/// through reflection where the linked ONNX knows the field and from the
/// unknown fields where it does not; empty when absent.
std::string metadataValue(const google::protobuf::Message &m, int number,
                          std::string_view key);

} // namespace mpc
