// metadata_props of ONNX IR 10 messages (passes/onnx/metadata_props.h).
#include "passes/onnx/metadata_props.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

namespace mpc {

/// The value of `key` in message m's metadata_props (field `number`), read
/// through reflection where the linked ONNX knows the field and from the
/// unknown fields where it does not; empty when absent.
std::string metadataValue(const google::protobuf::Message &m, int number,
                          std::string_view key) {
  const google::protobuf::Reflection *r = m.GetReflection();
  if (const auto *field = m.GetDescriptor()->FindFieldByNumber(number)) {
    if (!field->is_repeated() ||
        field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE)
      return {};
    for (int i = 0, n = r->FieldSize(m, field); i < n; ++i) {
      const auto *kv = dynamic_cast<const onnx::StringStringEntryProto *>(
          &r->GetRepeatedMessage(m, field, i));
      if (kv && kv->key() == key)
        return kv->value();
    }
    return {};
  }
  const google::protobuf::UnknownFieldSet &unknown = r->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    if (f.number() != number ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto kv;
    if (kv.ParseFromString(f.length_delimited()) && kv.key() == key)
      return kv.value();
  }
  return {};
}

} // namespace mpc
