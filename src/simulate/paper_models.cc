#include "simulate/paper_models.h"

#include "poseidon/errors.h"
#include "poseidon/options.h"
#include "simulate/net_builder.h"

namespace poseidon::sim {

std::vector<std::string> paperModelNames() {
  return {"alexnet", "vgg19", "vgg19-22k", "googlenet", "inception-v3", "resnet-152"};
}

SimModel paperModel(const std::string& name) {
  if (name == "alexnet") return alexnet();
  if (name == "vgg19") return vgg19();
  if (name == "vgg19-22k") return vgg19(21841);
  if (name == "googlenet") return googlenet();
  if (name == "inception-v3") return inceptionV3();
  if (name == "resnet-152") return resnet152();
  std::string names;
  for (const auto& n : paperModelNames()) names += (names.empty() ? "" : ", ") + n;
  throw OptionError("{model=" + name + "}: the simulator knows " + names + " (or give {profile=FILE})");
}

// Batch 256 as in the 2015 paper's AlexNet runs; 227 x 227 input, Caffe's layout.
SimModel alexnet() {
  NetBuilder b("alexnet", 256);
  Shape x{3, 227, 227};
  x = NetBuilder::pool(b.conv("conv1", x, 96, 11, 4), 3, 2, 0, true);
  ConvArgs c2{256, 5, 5, 1, 2, 2, 2};
  x = NetBuilder::pool(b.conv("conv2", x, c2), 3, 2, 0, true);
  x = b.conv("conv3", x, 384, 3, 1, 1);
  ConvArgs grouped{384, 3, 3, 1, 1, 1, 2};
  x = b.conv("conv4", x, grouped);
  grouped.out = 256;
  x = NetBuilder::pool(b.conv("conv5", x, grouped), 3, 2, 0, true);
  x = b.fc("fc6", x, 4096);
  x = b.fc("fc7", x, 4096);
  b.fc("fc8", x, 1000);
  return b.take();
}

SimModel vgg19(std::int64_t classes) {
  NetBuilder b(classes == 1000 ? "vgg19" : "vgg19-22k", 32);
  Shape x{3, 224, 224};
  const std::int64_t widths[] = {64, 128, 256, 512, 512};
  const int convs[] = {2, 2, 4, 4, 4};
  int n = 0;
  for (int stage = 0; stage < 5; ++stage) {
    for (int i = 0; i < convs[stage]; ++i) x = b.conv("conv" + std::to_string(++n), x, widths[stage], 3, 1, 1);
    x = NetBuilder::pool(x, 2, 2);
  }
  x = b.fc("fc6", x, 4096);
  x = b.fc("fc7", x, 4096);
  b.fc("fc8", x, classes);
  return b.take();
}

namespace {

// GoogLeNet's module: 1x1; 1x1 then 3x3; 1x1 then 5x5; 3x3 max pool then 1x1.
Shape inception(NetBuilder& b, const std::string& n, Shape x, std::int64_t c1, std::int64_t r3, std::int64_t c3,
                std::int64_t r5, std::int64_t c5, std::int64_t pp) {
  const Shape a = b.conv(n + ".1x1", x, c1, 1);
  const Shape m = b.conv(n + ".3x3", b.conv(n + ".3x3_reduce", x, r3, 1), c3, 3, 1, 1);
  const Shape f = b.conv(n + ".5x5", b.conv(n + ".5x5_reduce", x, r5, 1), c5, 5, 1, 2);
  const Shape p = b.conv(n + ".pool_proj", NetBuilder::pool(x, 3, 1, 1), pp, 1);
  return NetBuilder::concat({a, m, f, p});
}

}  // namespace

// Batch 128 as in ATC'17; 224 x 224 input; Caffe's pooling rounds up.
SimModel googlenet() {
  NetBuilder b("googlenet", 128);
  Shape x{3, 224, 224};
  x = NetBuilder::pool(b.conv("conv1", x, 64, 7, 2, 3), 3, 2, 0, true);
  x = b.conv("conv2.3x3", b.conv("conv2.3x3_reduce", x, 64, 1), 192, 3, 1, 1);
  x = NetBuilder::pool(x, 3, 2, 0, true);
  x = inception(b, "3a", x, 64, 96, 128, 16, 32, 32);
  x = inception(b, "3b", x, 128, 128, 192, 32, 96, 64);
  x = NetBuilder::pool(x, 3, 2, 0, true);
  x = inception(b, "4a", x, 192, 96, 208, 16, 48, 64);
  x = inception(b, "4b", x, 160, 112, 224, 24, 64, 64);
  x = inception(b, "4c", x, 128, 128, 256, 24, 64, 64);
  x = inception(b, "4d", x, 112, 144, 288, 32, 64, 64);
  x = inception(b, "4e", x, 256, 160, 320, 32, 128, 128);
  x = NetBuilder::pool(x, 3, 2, 0, true);
  x = inception(b, "5a", x, 256, 160, 320, 32, 128, 128);
  x = inception(b, "5b", x, 384, 192, 384, 48, 128, 128);
  b.fc("loss3.classifier", NetBuilder::pool(x, 7, 1), 1000);
  return b.take();
}

namespace {

// torchvision's BasicConv2d: conv without bias, then batch norm.
Shape bconvRect(NetBuilder& b, const std::string& n, Shape x, std::int64_t out, std::int64_t kh, std::int64_t kw,
                std::int64_t ph, std::int64_t pw) {
  return b.conv(n, x, ConvArgs{out, kh, kw, 1, ph, pw, 1, false, true});
}

Shape bconv(NetBuilder& b, const std::string& n, Shape x, std::int64_t out, std::int64_t k, std::int64_t s = 1,
            std::int64_t p = 0) {
  return b.conv(n, x, ConvArgs{out, k, k, s, p, p, 1, false, true});
}

Shape inceptionA(NetBuilder& b, const std::string& n, Shape x, std::int64_t pool_features) {
  const Shape a = bconv(b, n + ".branch1x1", x, 64, 1);
  const Shape f = bconv(b, n + ".branch5x5_2", bconv(b, n + ".branch5x5_1", x, 48, 1), 64, 5, 1, 2);
  Shape d = bconv(b, n + ".branch3x3dbl_1", x, 64, 1);
  d = bconv(b, n + ".branch3x3dbl_3", bconv(b, n + ".branch3x3dbl_2", d, 96, 3, 1, 1), 96, 3, 1, 1);
  const Shape p = bconv(b, n + ".branch_pool", NetBuilder::pool(x, 3, 1, 1), pool_features, 1);
  return NetBuilder::concat({a, f, d, p});
}

Shape inceptionB(NetBuilder& b, const std::string& n, Shape x) {
  const Shape a = bconv(b, n + ".branch3x3", x, 384, 3, 2);
  Shape d = bconv(b, n + ".branch3x3dbl_2", bconv(b, n + ".branch3x3dbl_1", x, 64, 1), 96, 3, 1, 1);
  d = bconv(b, n + ".branch3x3dbl_3", d, 96, 3, 2);
  return NetBuilder::concat({a, d, NetBuilder::pool(x, 3, 2)});
}

Shape inceptionC(NetBuilder& b, const std::string& n, Shape x, std::int64_t c7) {
  const Shape a = bconv(b, n + ".branch1x1", x, 192, 1);
  Shape s = bconv(b, n + ".branch7x7_1", x, c7, 1);
  s = bconvRect(b, n + ".branch7x7_2", s, c7, 1, 7, 0, 3);
  s = bconvRect(b, n + ".branch7x7_3", s, 192, 7, 1, 3, 0);
  Shape d = bconv(b, n + ".branch7x7dbl_1", x, c7, 1);
  d = bconvRect(b, n + ".branch7x7dbl_2", d, c7, 7, 1, 3, 0);
  d = bconvRect(b, n + ".branch7x7dbl_3", d, c7, 1, 7, 0, 3);
  d = bconvRect(b, n + ".branch7x7dbl_4", d, c7, 7, 1, 3, 0);
  d = bconvRect(b, n + ".branch7x7dbl_5", d, 192, 1, 7, 0, 3);
  const Shape p = bconv(b, n + ".branch_pool", NetBuilder::pool(x, 3, 1, 1), 192, 1);
  return NetBuilder::concat({a, s, d, p});
}

Shape inceptionD(NetBuilder& b, const std::string& n, Shape x) {
  const Shape a = bconv(b, n + ".branch3x3_2", bconv(b, n + ".branch3x3_1", x, 192, 1), 320, 3, 2);
  Shape s = bconv(b, n + ".branch7x7x3_1", x, 192, 1);
  s = bconvRect(b, n + ".branch7x7x3_2", s, 192, 1, 7, 0, 3);
  s = bconvRect(b, n + ".branch7x7x3_3", s, 192, 7, 1, 3, 0);
  s = bconv(b, n + ".branch7x7x3_4", s, 192, 3, 2);
  return NetBuilder::concat({a, s, NetBuilder::pool(x, 3, 2)});
}

Shape inceptionE(NetBuilder& b, const std::string& n, Shape x) {
  const Shape a = bconv(b, n + ".branch1x1", x, 320, 1);
  const Shape t = bconv(b, n + ".branch3x3_1", x, 384, 1);
  const Shape t1 = bconvRect(b, n + ".branch3x3_2a", t, 384, 1, 3, 0, 1);
  const Shape t2 = bconvRect(b, n + ".branch3x3_2b", t, 384, 3, 1, 1, 0);
  Shape d = bconv(b, n + ".branch3x3dbl_2", bconv(b, n + ".branch3x3dbl_1", x, 448, 1), 384, 3, 1, 1);
  const Shape d1 = bconvRect(b, n + ".branch3x3dbl_3a", d, 384, 1, 3, 0, 1);
  const Shape d2 = bconvRect(b, n + ".branch3x3dbl_3b", d, 384, 3, 1, 1, 0);
  const Shape p = bconv(b, n + ".branch_pool", NetBuilder::pool(x, 3, 1, 1), 192, 1);
  return NetBuilder::concat({a, t1, t2, d1, d2, p});
}

}  // namespace

// 299 x 299 input, batch 32 (the paper does not state Inception-V3's batch per node).
SimModel inceptionV3() {
  NetBuilder b("inception-v3", 32);
  Shape x{3, 299, 299};
  x = bconv(b, "Conv2d_1a_3x3", x, 32, 3, 2);
  x = bconv(b, "Conv2d_2a_3x3", x, 32, 3);
  x = bconv(b, "Conv2d_2b_3x3", x, 64, 3, 1, 1);
  x = NetBuilder::pool(x, 3, 2);
  x = bconv(b, "Conv2d_3b_1x1", x, 80, 1);
  x = bconv(b, "Conv2d_4a_3x3", x, 192, 3);
  x = NetBuilder::pool(x, 3, 2);
  x = inceptionA(b, "Mixed_5b", x, 32);
  x = inceptionA(b, "Mixed_5c", x, 64);
  x = inceptionA(b, "Mixed_5d", x, 64);
  x = inceptionB(b, "Mixed_6a", x);
  x = inceptionC(b, "Mixed_6b", x, 128);
  x = inceptionC(b, "Mixed_6c", x, 160);
  x = inceptionC(b, "Mixed_6d", x, 160);
  x = inceptionC(b, "Mixed_6e", x, 192);
  x = inceptionD(b, "Mixed_7a", x);
  x = inceptionE(b, "Mixed_7b", x);
  x = inceptionE(b, "Mixed_7c", x);
  b.fc("fc", NetBuilder::pool(x, x.h, 1), 1000);
  return b.take();
}

// torchvision's ResNet-152 (v1.5: the stride in the 3x3 conv), 224 x 224, batch 32.
SimModel resnet152() {
  NetBuilder b("resnet-152", 32);
  Shape x{3, 224, 224};
  x = NetBuilder::pool(bconv(b, "conv1", x, 64, 7, 2, 3), 3, 2, 1);
  const int blocks[] = {3, 8, 36, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t planes = 64LL << stage;
    for (int i = 0; i < blocks[stage]; ++i) {
      const std::string n = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      const std::int64_t s = (i == 0 && stage > 0) ? 2 : 1;
      Shape y = bconv(b, n + ".conv1", x, planes, 1);
      y = bconv(b, n + ".conv2", y, planes, 3, s, 1);
      y = bconv(b, n + ".conv3", y, planes * 4, 1);
      if (i == 0) bconv(b, n + ".downsample", x, planes * 4, 1, s);
      x = y;
    }
  }
  b.fc("fc", NetBuilder::pool(x, x.h, 1), 1000);
  return b.take();
}

}  // namespace poseidon::sim
