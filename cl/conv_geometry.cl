#define GEO_C geo.s0  // input channels (all groups)
#define GEO_H geo.s1  // input height
#define GEO_W geo.s2  // input width
#define GEO_K geo.s3  // output channels (all groups)
#define GEO_R geo.s4  // kernel height
#define GEO_S geo.s5  // kernel width
#define GEO_P geo.s6  // output height
#define GEO_Q geo.s7  // output width
#define GEO_SH geo.s8 // strides
#define GEO_SW geo.s9
#define GEO_PH geo.sa // zero padding
#define GEO_PW geo.sb
#define GEO_DH geo.sc // dilations
#define GEO_DW geo.sd
#define GEO_G geo.se  // groups
