// A base for a class that owns what must not be copied (a descriptor, a thread, a device handle, a
// folder it removes): deriving from it deletes the copy constructor and copy assignment, once for all such
// classes, as boost::noncopyable does. A class that can move says so itself (JobLock).
#pragma once

namespace train {

class NonCopyable {
 public:
  NonCopyable(const NonCopyable&) = delete;
  NonCopyable& operator=(const NonCopyable&) = delete;

 protected:
  NonCopyable() = default;
  ~NonCopyable() = default;
};

}  // namespace train
