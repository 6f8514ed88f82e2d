/* The real addresses of the protobuf-c descriptors Swift needs by pointer.
 * Swift imports a C `const` global as a value: `withUnsafePointer(to:)` on it
 * points at a temporary copy that dies with the closure. These functions
 * hand out the address of the static descriptor itself, valid for the life
 * of the process. Not generated: tools/gen-protos leaves this file alone. */
#ifndef GROSER_DESCRIPTORS_H
#define GROSER_DESCRIPTORS_H

#include "groser/v1/service.pb-c.h"

static inline const ProtobufCMessageDescriptor *groser_request_descriptor(void) {
    return &groser__v1__request__descriptor;
}

static inline const ProtobufCMessageDescriptor *groser_response_descriptor(void) {
    return &groser__v1__response__descriptor;
}

#endif
