# LibTorch from the torch wheel of ${Python_EXECUTABLE} (torch.utils.cmake_prefix_path), so
# that the CLI, the examples, the tests and the Python extension all use one build of torch.
# A CUDA wheel's CMake package looks for the CUDA toolkit: /usr/local/cuda is tried when
# nvcc is not on PATH. Imported targets are directory-scoped: included from the top level
# so every folder can link them.
execute_process(
  COMMAND ${Python_EXECUTABLE} -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_out RESULT_VARIABLE _torch_rc ERROR_VARIABLE _torch_err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "${Python_EXECUTABLE} cannot import torch (${_torch_err}): run scripts/setup.sh (it makes "
                      ".venv with torch), or pass -DPython_EXECUTABLE=<a python with torch>")
endif()
string(REPLACE "\n" ";" _torch_out "${_torch_out}")
list(GET _torch_out 0 POSEIDON_TORCH_PREFIX)
list(GET _torch_out 1 POSEIDON_TORCH_VERSION)
list(PREPEND CMAKE_PREFIX_PATH ${POSEIDON_TORCH_PREFIX})
# A build folder configured before (another torch, or Debian's LibTorch) keeps Torch_DIR and
# Caffe2_DIR in its cache, which would win over the prefix above: forget them unless they
# are this torch's.
foreach(_var Torch_DIR Caffe2_DIR)
  if(DEFINED CACHE{${_var}})
    string(FIND "${${_var}}" "${POSEIDON_TORCH_PREFIX}" _at)
    if(NOT _at EQUAL 0)
      unset(${_var} CACHE)
    endif()
  endif()
endforeach()
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  find_program(_nvcc nvcc)
  if(NOT _nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
endif()
find_package(Torch REQUIRED)
message(STATUS "LibTorch ${POSEIDON_TORCH_VERSION} from ${POSEIDON_TORCH_PREFIX}")
