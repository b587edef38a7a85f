// The choices train's own training offers, as types, each with its names as the hyperparameters spell them.
// One table per choice: the schema offers its names and types the job's pick from it once
// (job/hyperparameter_schema.cpp), and logs name a value from it; nothing after the job description compares
// a name. The data rooms (runtime/data/) take their augmentation and format from here: the only file of job/
// they include, so it includes nothing but common/.
#pragma once

#include "common/enum_names.h"

namespace train {

enum class Optimizer { sgd, nag, lars };
inline constexpr EnumName<Optimizer> optimizer_names[] = {
    {Optimizer::sgd, "sgd"}, {Optimizer::nag, "nag"}, {Optimizer::lars, "lars"}};
inline const char* optimizer_name(Optimizer optimizer) { return name_of(optimizer_names, optimizer); }

enum class Precision { float32, bfloat16 };
inline constexpr EnumName<Precision> precision_names[] = {{Precision::float32, "float32"},
                                                          {Precision::bfloat16, "bfloat16"}};
inline const char* precision_name(Precision precision) { return name_of(precision_names, precision); }

// The learning rate's decay after warm-up (runtime/learning_rate.h).
enum class LrDecay { step, poly, cosine };
inline constexpr EnumName<LrDecay> lr_decay_names[] = {
    {LrDecay::step, "step"}, {LrDecay::poly, "poly"}, {LrDecay::cosine, "cosine"}};
inline const char* lr_decay_name(LrDecay decay) { return name_of(lr_decay_names, decay); }

// How a channel's data is read: `detect` ("auto") detects each channel's format
// (runtime/data/sources/data_channel.h); `synthetic` reads no channel.
enum class DataFormat { detect, image_folder, image_list, tfrecord, recordio, synthetic };
inline constexpr EnumName<DataFormat> data_format_names[] = {
    {DataFormat::detect, "auto"},         {DataFormat::image_folder, "image_folder"},
    {DataFormat::image_list, "image_list"}, {DataFormat::tfrecord, "tfrecord"},
    {DataFormat::recordio, "recordio"},   {DataFormat::synthetic, "synthetic"}};
inline const char* data_format_name(DataFormat format) { return name_of(data_format_names, format); }

// The geometry of a training image (runtime/data/images/transform.h).
enum class Augmentation { none, crop, crop_color };
inline constexpr EnumName<Augmentation> augmentation_names[] = {
    {Augmentation::none, "none"}, {Augmentation::crop, "crop"}, {Augmentation::crop_color, "crop_color"}};
inline const char* augmentation_name(Augmentation augmentation) { return name_of(augmentation_names, augmentation); }

// The hyperparameter `device`; the job description resolves `automatic` to a Device by the host's GPUs.
enum class DeviceChoice { automatic, cuda, cpu };
inline constexpr EnumName<DeviceChoice> device_choice_names[] = {
    {DeviceChoice::automatic, "auto"}, {DeviceChoice::cuda, "cuda"}, {DeviceChoice::cpu, "cpu"}};
enum class Device { cpu, cuda };
inline constexpr EnumName<Device> device_names[] = {{Device::cpu, "cpu"}, {Device::cuda, "cuda"}};
inline const char* device_name(Device device) { return name_of(device_names, device); }

}  // namespace train
