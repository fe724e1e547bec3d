// Behavioural model of the Lattice ECP5 DP16KD in exactly the configuration rtl/bram.py
// instantiates (style "ecp5"): pseudo dual port in the 18-bit mode, 1024 words; port A writes
// (CEA high, WEA the write enable, both byte enables ADA1/ADA0 high), port B reads through the
// array latch (CEB) and the output register (OCEB, REGMODE_B = "OUTREG"): two cycles from ADB to
// DOB. RSTA/RSTB, CS*, WEB and the data inputs of port B are tied low.
// It exists so Verilator can lint and simulate generated designs; Yosys never reads it (synth_ecp5 uses
// its own black box, whose simulation model in Yosys's cells_sim.v has no behaviour). Every
// parameter is checked against that configuration at time 0 and the tied inputs on every clock
// edge; a read and a write of the same word at the same edge (undefined in the primitive) stops
// the simulation. Only the ports rtl/bram.py connects are declared. Its fidelity to the silicon
// rests on Lattice's description of the primitive (TN1264); no vendor simulation model is
// available offline.
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off MULTIDRIVEN */
module DP16KD (
    input DIA0,
    input DIA1,
    input DIA2,
    input DIA3,
    input DIA4,
    input DIA5,
    input DIA6,
    input DIA7,
    input DIA8,
    input DIA9,
    input DIA10,
    input DIA11,
    input DIA12,
    input DIA13,
    input DIA14,
    input DIA15,
    input DIA16,
    input DIA17,
    input ADA0,
    input ADA1,
    input ADA2,
    input ADA3,
    input ADA4,
    input ADA5,
    input ADA6,
    input ADA7,
    input ADA8,
    input ADA9,
    input ADA10,
    input ADA11,
    input ADA12,
    input ADA13,
    input CEA,
    input OCEA,
    input CLKA,
    input WEA,
    input RSTA,
    input CSA0,
    input CSA1,
    input CSA2,
    input DIB0,
    input DIB1,
    input DIB2,
    input DIB3,
    input DIB4,
    input DIB5,
    input DIB6,
    input DIB7,
    input DIB8,
    input DIB9,
    input DIB10,
    input DIB11,
    input DIB12,
    input DIB13,
    input DIB14,
    input DIB15,
    input DIB16,
    input DIB17,
    input ADB0,
    input ADB1,
    input ADB2,
    input ADB3,
    input ADB4,
    input ADB5,
    input ADB6,
    input ADB7,
    input ADB8,
    input ADB9,
    input ADB10,
    input ADB11,
    input ADB12,
    input ADB13,
    input CEB,
    input OCEB,
    input CLKB,
    input WEB,
    input RSTB,
    input CSB0,
    input CSB1,
    input CSB2,
    output DOB0,
    output DOB1,
    output DOB2,
    output DOB3,
    output DOB4,
    output DOB5,
    output DOB6,
    output DOB7,
    output DOB8,
    output DOB9,
    output DOB10,
    output DOB11,
    output DOB12,
    output DOB13,
    output DOB14,
    output DOB15,
    output DOB16,
    output DOB17
);
    parameter DATA_WIDTH_A = 18;
    parameter DATA_WIDTH_B = 18;
    parameter REGMODE_A = "NOREG";
    parameter REGMODE_B = "NOREG";
    parameter RESETMODE = "SYNC";
    parameter ASYNC_RESET_RELEASE = "SYNC";
    parameter CSDECODE_A = "0b000";
    parameter CSDECODE_B = "0b000";
    parameter WRITEMODE_A = "NORMAL";
    parameter WRITEMODE_B = "NORMAL";
    parameter GSR = "ENABLED";

    wire [17:0] dia = {DIA17,DIA16,DIA15,DIA14,DIA13,DIA12,DIA11,DIA10,DIA9,DIA8,DIA7,DIA6,DIA5,DIA4,DIA3,DIA2,DIA1,DIA0};
    wire [13:0] ada = {ADA13,ADA12,ADA11,ADA10,ADA9,ADA8,ADA7,ADA6,ADA5,ADA4,ADA3,ADA2,ADA1,ADA0};
    wire [13:0] adb = {ADB13,ADB12,ADB11,ADB10,ADB9,ADB8,ADB7,ADB6,ADB5,ADB4,ADB3,ADB2,ADB1,ADB0};
    wire [17:0] dib = {DIB17,DIB16,DIB15,DIB14,DIB13,DIB12,DIB11,DIB10,DIB9,DIB8,DIB7,DIB6,DIB5,DIB4,DIB3,DIB2,DIB1,DIB0};
    reg  [17:0] mem [0:1023];
    reg  [17:0] latch_b;
    reg  [17:0] dob;
    integer i;

    initial begin
        if (DATA_WIDTH_A != 18 || DATA_WIDTH_B != 18 || REGMODE_A != "NOREG" || REGMODE_B != "OUTREG"
            || RESETMODE != "SYNC" || ASYNC_RESET_RELEASE != "SYNC" || CSDECODE_A != "0b000"
            || CSDECODE_B != "0b000" || WRITEMODE_A != "NORMAL" || WRITEMODE_B != "NORMAL"
            || GSR != "DISABLED") begin
            $display("DP16KD model: unsupported configuration");
            $stop;
        end
        for (i = 0; i < 1024; i = i + 1) mem[i] = 18'd0;   // INITVAL_* all zero
        latch_b = 18'd0;
        dob = 18'd0;
    end

    always @(posedge CLKA) begin
        if (CEA !== 1'b1 || OCEA !== 1'b0 || RSTA !== 1'b0 || {CSA2, CSA1, CSA0} !== 3'b000
            || ada[1:0] !== 2'b11) begin
            $display("DP16KD model: CEA must be high, OCEA/RSTA/CSA low and both byte enables high");
            $stop;
        end
        if (WEA) begin
            if (CEB && ada[13:4] == adb[13:4]) begin
                $display("DP16KD model: read and write of word %0d at the same edge (undefined)", ada[13:4]);
                $stop;
            end
            mem[ada[13:4]] <= dia;
        end
    end

    always @(posedge CLKB) begin
        if (WEB !== 1'b0 || RSTB !== 1'b0 || {CSB2, CSB1, CSB0} !== 3'b000 || dib !== 18'd0) begin
            $display("DP16KD model: WEB/RSTB/CSB and the port-B data inputs must be tied low");
            $stop;
        end
        if (CEB) latch_b <= mem[adb[13:4]];
        if (OCEB) dob <= latch_b;
    end

    assign {DOB17,DOB16,DOB15,DOB14,DOB13,DOB12,DOB11,DOB10,DOB9,DOB8,DOB7,DOB6,DOB5,DOB4,DOB3,DOB2,DOB1,DOB0} = dob;
endmodule
/* verilator lint_on MULTIDRIVEN */
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */
