// The papers' networks, built from their architectures (net_builder.h): AlexNet (Caffe's,
// with its grouped convs), VGG19, VGG19-22K (VGG19 with a 21841-class last layer),
// GoogLeNet (Szegedy et al. 2014, Caffe's bvlc_googlenet without the auxiliary heads),
// Inception-V3 and ResNet-152 (torchvision's, without Inception-V3's auxiliary head).
#pragma once

#include <string>
#include <vector>

#include "simulate/sim_model.h"

namespace poseidon::sim {

std::vector<std::string> paperModelNames();
// Throws InputError listing the names on an unknown one.
SimModel paperModel(const std::string& name);

SimModel alexnet();
SimModel vgg19(std::int64_t classes = 1000);
SimModel googlenet();
SimModel inceptionV3();
SimModel resnet152();

}  // namespace poseidon::sim
