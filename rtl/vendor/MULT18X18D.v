// Behavioural model of the Lattice ECP5 MULT18X18D in exactly the configurations rtl/dsp.py
// instantiates (style "ecp5"): signed 18x18 multiply with the input registers A and B, the
// pipeline register and the output register all on CLK0 with clock enable CE0 (three cycles
// from A/B to P), or the same without the pipeline register (REG_PIPELINE_CLK "NONE": two
// cycles, rtl/dsp.operand_product), RST0 tied low, SOURCEA/SOURCEB low, SIGNEDA/SIGNEDB high.
// It exists so Verilator can lint and simulate the generated engine; Yosys never reads it
// (synth_ecp5 uses its own black box). Every parameter is checked against that configuration at
// time 0 and the tied inputs on every clock edge: anything else stops the simulation instead of
// being modelled wrongly. Only the ports rtl/dsp.py connects are declared (connecting any other
// is an elaboration error, not a silent no-op). Its fidelity to the silicon rests on Lattice's
// description of the primitive; no vendor simulation model is available offline.
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off WIDTHTRUNC */
module MULT18X18D (
    input A0,
    input A1,
    input A2,
    input A3,
    input A4,
    input A5,
    input A6,
    input A7,
    input A8,
    input A9,
    input A10,
    input A11,
    input A12,
    input A13,
    input A14,
    input A15,
    input A16,
    input A17,
    input B0,
    input B1,
    input B2,
    input B3,
    input B4,
    input B5,
    input B6,
    input B7,
    input B8,
    input B9,
    input B10,
    input B11,
    input B12,
    input B13,
    input B14,
    input B15,
    input B16,
    input B17,
    input C0,
    input C1,
    input C2,
    input C3,
    input C4,
    input C5,
    input C6,
    input C7,
    input C8,
    input C9,
    input C10,
    input C11,
    input C12,
    input C13,
    input C14,
    input C15,
    input C16,
    input C17,
    input SIGNEDA,
    input SIGNEDB,
    input SOURCEA,
    input SOURCEB,
    input CLK0,
    input CE0,
    input RST0,
    output P0,
    output P1,
    output P2,
    output P3,
    output P4,
    output P5,
    output P6,
    output P7,
    output P8,
    output P9,
    output P10,
    output P11,
    output P12,
    output P13,
    output P14,
    output P15,
    output P16,
    output P17,
    output P18,
    output P19,
    output P20,
    output P21,
    output P22,
    output P23,
    output P24,
    output P25,
    output P26,
    output P27,
    output P28,
    output P29,
    output P30,
    output P31,
    output P32,
    output P33,
    output P34,
    output P35
);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTA_CE = "CE0";
    parameter REG_INPUTA_RST = "RST0";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTB_CE = "CE0";
    parameter REG_INPUTB_RST = "RST0";
    parameter REG_INPUTC_CLK = "NONE";
    parameter REG_INPUTC_CE = "CE0";
    parameter REG_INPUTC_RST = "RST0";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_PIPELINE_CE = "CE0";
    parameter REG_PIPELINE_RST = "RST0";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter REG_OUTPUT_CE = "CE0";
    parameter REG_OUTPUT_RST = "RST0";
    parameter CLK0_DIV = "ENABLED";
    parameter CLK1_DIV = "ENABLED";
    parameter CLK2_DIV = "ENABLED";
    parameter CLK3_DIV = "ENABLED";
    parameter HIGHSPEED_CLK = "NONE";
    parameter GSR = "ENABLED";
    parameter CAS_MATCH_REG = "FALSE";
    parameter SOURCEB_MODE = "B_SHIFT";
    parameter MULT_BYPASS = "DISABLED";
    parameter RESETMODE = "SYNC";

    wire [17:0] a = {A17,A16,A15,A14,A13,A12,A11,A10,A9,A8,A7,A6,A5,A4,A3,A2,A1,A0};
    wire [17:0] b = {B17,B16,B15,B14,B13,B12,B11,B10,B9,B8,B7,B6,B5,B4,B3,B2,B1,B0};
    reg  [17:0] ra, rb;
    reg  [35:0] p;

    reg  [35:0] m;

    initial begin
        if (REG_INPUTA_CLK != "CLK0" || REG_INPUTB_CLK != "CLK0"
            || (REG_PIPELINE_CLK != "CLK0" && REG_PIPELINE_CLK != "NONE")
            || REG_OUTPUT_CLK != "CLK0" || REG_INPUTC_CLK != "NONE"
            || REG_INPUTA_CE != "CE0" || REG_INPUTB_CE != "CE0" || REG_PIPELINE_CE != "CE0"
            || REG_OUTPUT_CE != "CE0" || REG_INPUTA_RST != "RST0" || REG_INPUTB_RST != "RST0"
            || REG_PIPELINE_RST != "RST0" || REG_OUTPUT_RST != "RST0" || RESETMODE != "SYNC"
            || GSR != "DISABLED" || MULT_BYPASS != "DISABLED" || SOURCEB_MODE != "B_SHIFT"
            || CAS_MATCH_REG != "FALSE" || HIGHSPEED_CLK != "NONE" || CLK0_DIV != "ENABLED") begin
            $display("MULT18X18D model: unsupported configuration");
            $stop;
        end
    end

    always @(posedge CLK0) begin
        if (RST0 !== 1'b0 || SOURCEA !== 1'b0 || SOURCEB !== 1'b0 || SIGNEDA !== 1'b1 || SIGNEDB !== 1'b1) begin
            $display("MULT18X18D model: RST0/SOURCEA/SOURCEB must be tied low and SIGNEDA/SIGNEDB high");
            $stop;
        end
        if (CE0) begin
            ra <= a;
            rb <= b;
            m <= $signed(ra) * $signed(rb);
            // separate statements: a ternary with the unsigned m would make the product unsigned
            if (REG_PIPELINE_CLK == "NONE") p <= $signed(ra) * $signed(rb);
            else p <= m;
        end
    end

    assign {P35,P34,P33,P32,P31,P30,P29,P28,P27,P26,P25,P24,P23,P22,P21,P20,P19,P18,P17,P16,P15,P14,P13,P12,P11,P10,P9,P8,P7,P6,P5,P4,P3,P2,P1,P0} = p;
endmodule
/* verilator lint_on WIDTHTRUNC */
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */
